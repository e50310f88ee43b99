"""A copy of a GGUF file without its tokenizer's arrays, for the reads that need only its settings and its tensors.

transformers reads a GGUF file's config, and again its weights, with gguf's ``GGUFReader``, which parses every element
of every metadata array: Gemma 3's 262,144 tokens, scores and token types cost about 14 CPU-seconds a read. The copy
keeps every other key-value pair, the tensor table and the tensor data byte for byte (a tensor's offset counts from the
start of the data section, so it stays valid), and records the vocabulary's size as ``<architecture>.vocab_size`` when
the file has none (transformers would otherwise count the tokens to set the config's ``vocab_size``).

Read by the GGUF specification (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md), versions 2 and 3,
little-endian; any other file raises ``ValueError``.
"""

from __future__ import annotations

import mmap
import shutil
import struct
from pathlib import Path

_VERSIONS = (2, 3)
_FIXED_WIDTH = {0: 1, 1: 1, 7: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 10: 8, 11: 8, 12: 8}  # value type -> bytes
_STRING, _ARRAY, _UINT32 = 8, 9, 4
_DEFAULT_ALIGNMENT = 32  # when the file has no general.alignment
_COPY_CHUNK = 16 * 2**20


def _after_value(blob, pos: int, value_type: int) -> int:
    """The offset just past one metadata value of ``value_type`` starting at ``pos``."""
    if value_type in _FIXED_WIDTH:
        return pos + _FIXED_WIDTH[value_type]
    if value_type == _STRING:
        (length,) = struct.unpack_from("<Q", blob, pos)
        return pos + 8 + length
    if value_type == _ARRAY:
        element_type, count = struct.unpack_from("<IQ", blob, pos)
        pos += 12
        if element_type in _FIXED_WIDTH:
            return pos + count * _FIXED_WIDTH[element_type]
        for _ in range(count):
            pos = _after_value(blob, pos, element_type)
        return pos
    raise ValueError(f"unknown GGUF metadata value type {value_type}")


def _string(blob, pos: int) -> tuple[str, int]:
    (length,) = struct.unpack_from("<Q", blob, pos)
    return bytes(blob[pos + 8:pos + 8 + length]).decode("utf-8"), pos + 8 + length


def copy_without_vocabulary(source: Path, target: Path) -> list[str]:
    """Write ``target``: ``source`` without its array-valued ``tokenizer.*`` keys. Returns the keys left out."""
    with open(source, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as blob:
        if len(blob) < 24 or blob[:4] != b"GGUF":
            raise ValueError(f"{source} is not a GGUF file")
        version, tensor_count, pair_count = struct.unpack_from("<IQQ", blob, 4)
        if version not in _VERSIONS:
            raise ValueError(f"{source} is GGUF version {version} (or big-endian); this copy reads versions 2 and 3")
        pos, kept, dropped = 24, [], []
        architecture, alignment, vocab_size, token_count = None, _DEFAULT_ALIGNMENT, False, None
        for _ in range(pair_count):
            start = pos
            key, pos = _string(blob, pos)
            (value_type,) = struct.unpack_from("<I", blob, pos)
            value_at = pos + 4
            pos = _after_value(blob, value_at, value_type)
            if key == "general.architecture":
                architecture, _ = _string(blob, value_at)
            elif key == "general.alignment":
                (alignment,) = struct.unpack_from("<I", blob, value_at)
            elif key.endswith(".vocab_size"):
                vocab_size = True
            elif key == "tokenizer.ggml.tokens":
                token_count = struct.unpack_from("<IQ", blob, value_at)[1]
            if key.startswith("tokenizer.") and value_type == _ARRAY:
                dropped.append(key)
            else:
                kept.append(bytes(blob[start:pos]))
        if not vocab_size and architecture and token_count is not None:
            name = f"{architecture}.vocab_size".encode()
            kept.append(struct.pack("<Q", len(name)) + name + struct.pack("<II", _UINT32, token_count))
        table_start = pos
        for _ in range(tensor_count):
            _name, pos = _string(blob, pos)
            (dimensions,) = struct.unpack_from("<I", blob, pos)
            pos += 4 + 8 * dimensions + 4 + 8  # the dimensions, the ggml type, the offset
        data_start = -(-pos // alignment) * alignment
        header = struct.pack("<4sIQQ", b"GGUF", version, tensor_count, len(kept)) + b"".join(kept)
        header += bytes(blob[table_start:pos])
        with open(target, "wb") as out:
            out.write(header + bytes(-len(header) % alignment))
            handle.seek(data_start)
            shutil.copyfileobj(handle, out, _COPY_CHUNK)
    return dropped
