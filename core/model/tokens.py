"""Readable labels for tokens, shared by every figure, table and sentence.

One rule for every tokenizer: a token is labelled with the text it stands for when decoded on its own (the case you
typed is kept), made visible. A space it carries is written "·" (SmolLM2's and GPT-2's `` my`` → ``·my``; a piece
inside a word, ``esterday``, has no mark); WordPiece keeps its own ``##`` on a piece that continues a word, because
decoded alone that is what it stands for (BERT's ``##iff``). A newline is written ``\\n``, a tab ``\\t`` and any
other invisible character as its escape (``\\x07``, ``\\u200b``): plain ASCII that every font draws. A token that
holds only part of a character's UTF-8 bytes is written as those bytes in hexadecimal (``<0xD8>``, SentencePiece's own
convention); the rest of its text stays as it is. Special tokens keep their own names ([CLS], <|endoftext|>).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from core.model.analysis import Analysis


def _byte_level_alphabet() -> dict[str, int]:
    """Byte-level BPE's (GPT-2's) character for each byte, inverted: ``{"Ġ": 0x20, "Ø": 0xD8, …}``."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = {b: b for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = 256 + extra
            extra += 1
    return {chr(c): b for b, c in chars.items()}


BYTE_OF_CHAR = _byte_level_alphabet()
BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")  # SentencePiece's byte fallback: one byte as a token
SPACE_MARKERS = ("Ġ", "▁")  # byte-level BPE's and SentencePiece's mark of a space the token carries
JOINERS = "\u200c\u200d"  # invisible, but they shape Arabic words and emoji sequences: kept
NAMED_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
PARTIAL_BYTES_NOTE = ("A label such as <0xD8> is a token that holds only part of a character: the tokenizer works on "
                      "the text's UTF-8 bytes, and a character written with several bytes (Arabic, most emoji, CJK) "
                      "can be split between tokens. Such a token is shown as its bytes in hexadecimal.")


def _visible_char(c: str) -> str:
    if c == " ":
        return "·"
    if c in NAMED_ESCAPES:
        return NAMED_ESCAPES[c]
    if c not in JOINERS and (unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") or c.isspace()):
        code = ord(c)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return c


def readable_token(text: str) -> str:
    """A token's decoded text as its label: spaces as "·", newline as ``\\n``, other invisible characters escaped,
    the empty text as "∅"; ``<0xD8>`` byte labels pass through. Not yet escaped for HTML or markdown."""
    return "".join(_visible_char(c) for c in text) or "∅"


def quoted_token(text: str) -> str:
    """A token's label in a sentence: “·Paris”. Not yet escaped for HTML or markdown."""
    return f"“{readable_token(text)}”"


def bytes_text(data: bytes) -> str:
    """UTF-8 bytes as text, each byte that is not part of a whole character as ``<0xNN>``."""
    out: list[str] = []
    while data:
        try:
            out.append(data.decode("utf-8"))
            break
        except UnicodeDecodeError as e:
            out.append(data[: e.start].decode("utf-8"))
            out.append("".join(f"<0x{b:02X}>" for b in data[e.start: e.end]))
            data = data[e.end:]
    return "".join(out)


def piece_text(piece: str) -> str | None:
    """A byte-level BPE piece (``ĠØ``) as text with its partial bytes in hex (`` <0xD8>``); ``None`` if the piece is
    not made of byte-level characters, or is a SentencePiece byte token (``<0xD8>``, returned as it is)."""
    if BYTE_TOKEN.fullmatch(piece):
        return piece
    if not piece or any(c not in BYTE_OF_CHAR for c in piece):
        return None
    return bytes_text(bytes(BYTE_OF_CHAR[c] for c in piece))


def decoded_tokens(tokenizer, ids) -> list[str]:
    """Each token id decoded on its own, spaces kept (`` Paris``); a token that is only part of a character's UTF-8
    bytes, which decodes to "�", comes back with those bytes as ``<0xD8>`` (for display: join these, never, to
    rebuild a text)."""
    ids = [int(i) for i in ids]
    texts = [tokenizer.decode([i], clean_up_tokenization_spaces=False) for i in ids]
    broken = [k for k, text in enumerate(texts) if "\ufffd" in text]
    if broken:
        pieces = tokenizer.convert_ids_to_tokens([ids[k] for k in broken])
        for k, piece in zip(broken, pieces):
            texts[k] = piece_text(piece) or texts[k]
    return texts


def _partial_in(offsets, special, i: int) -> bool:
    start, end = offsets[i]
    for j in (i - 1, i + 1):
        if 0 <= j < len(offsets) and not special[j]:
            s, e = offsets[j]
            if e > s and s < end and start < e:
                return True
    return False


def _span_text(text: str, tokens, offsets, special, i: int) -> str:
    piece = tokens[i]
    start, end = offsets[i]
    if _partial_in(offsets, special, i):
        return piece_text(piece) or piece
    span = text[start:end]
    if piece.startswith("##"):
        return "##" + span
    if piece.startswith(SPACE_MARKERS) and not span[:1].isspace() and start > 0 and text[start - 1].isspace():
        return text[start - 1] + span  # the tokenizer's offsets left out the space its token carries
    return span


def token_text(analysis: Analysis, i: int) -> str:
    """The text token ``i`` stands for when decoded on its own, from its span of the text (in the case typed)."""
    return _span_text(analysis.text, analysis.tokens, analysis.offsets, analysis.special_mask, i)


def span_labels(text: str, tokens: Sequence[str], offsets: Sequence[tuple[int, int]],
                special: Sequence[bool]) -> list[str]:
    """One readable label per token from the tokenizer's pieces and their ``(start, end)`` spans of ``text``
    (``readable_token`` of the text each stands for); special tokens and tokens without a span keep their own name.
    Labels may repeat. ``token_labels`` is this for an ``Analysis``."""
    labels: list[str] = []
    for i, (start, end) in enumerate(offsets):
        if special[i] or end <= start:
            labels.append(tokens[i])
        else:
            labels.append(readable_token(_span_text(text, tokens, offsets, special, i)))
    return labels


def token_labels(analysis: Analysis) -> list[str]:
    """One readable label per token (``readable_token`` of ``token_text``); special tokens and tokens without a span
    of the text keep their own name. Labels may repeat."""
    return span_labels(analysis.text, analysis.tokens, analysis.offsets, analysis.special_mask)


def unique_labels(labels: list[str]) -> list[str]:
    """Labels made unique by their position where a label repeats (``·the (2)``; "·" is a space, not a separator)."""
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    return [f"{label} ({i})" if counts[label] > 1 else label for i, label in enumerate(labels)]
