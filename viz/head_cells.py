"""A layer's heads packed for the browser's head switch (``ui.head_switch``): every head's cells as compact codes, the
token labels and the palette, so that the browser draws any head of the layer without asking the server again."""

from __future__ import annotations

import hashlib
import json
import zlib

import numpy as np

from core.attention_heads.long_attention import PooledHead
from viz.attention_cells import MASK_COLOR, colormap, scale_max
from viz.long_heatmap import palette_png, png_source

MASKED = 65535  # the code of a masked cell (NaN: a decoder's future, a key outside a sliding window)
STEPS = 65534  # the largest code of a value
DIGITS = 4  # a code is the value at 4 decimals (weight × 10,000, half up) when the layer's largest value allows


def encode_codes(matrix: np.ndarray, step: float) -> bytes:
    """``matrix`` ``[r, c]`` as uint16 codes ``value / step`` rounded half up (float32 values × 10^4 are exact in
    float64, so at ``step`` 1e-4 a code is the value's 4-decimal rounding), NaN as ``MASKED``; sent as base64 of their
    high bytes then their low bytes, zlib-deflated (about a third of the bytes for attention weights; the browser
    inflates them with its own ``DecompressionStream``). They travel as bytes (``to_wire``), never as base64 text:
    the websocket's own deflate then has a quarter fewer bytes to go through, and the browser no JSON string to parse."""
    values = np.asarray(matrix, dtype=np.float32).astype(np.float64)
    scaled = np.nan_to_num(values, nan=0.0) * 10**DIGITS if step == 10**-DIGITS else np.nan_to_num(values, nan=0.0) / step
    codes = np.where(np.isnan(values), MASKED, np.clip(np.floor(scaled + 0.5), 0, STEPS))
    codes = codes.astype(np.uint16)
    planes = np.concatenate([(codes >> 8).astype(np.uint8).ravel(), (codes & 0xFF).astype(np.uint8).ravel()])
    return zlib.compress(planes.tobytes(), 6)


def decode_codes(packed: bytes, step: float, shape: tuple[int, int]) -> np.ndarray:
    """The inverse of ``encode_codes`` (what the browser does): the values, NaN where a cell is masked."""
    planes = np.frombuffer(zlib.decompress(packed), dtype=np.uint8)
    half = planes.size // 2
    codes = ((planes[:half].astype(np.uint16) << 8) | planes[half:]).reshape(shape)
    return np.where(codes == MASKED, np.nan, codes.astype(np.float64) * step)


def layer_cells(matrices: np.ndarray, labels: list[str], *, layer: int, colorscale: str, per_head_scale: bool,
                key_labels: list[str] | None = None, hidden: np.ndarray | None = None) -> dict:
    """What the head switch draws a layer from: ``matrices`` ``[heads, r, c]`` (NaN or ``hidden`` cells masked) as
    codes (weights × 10,000, or steps of the largest value / 65,534 past 6.5534), the rows' ``labels`` and the
    columns' ``key_labels`` as the app writes tokens (drawn as text, never as HTML), each head's colour-scale top (as
    the Plotly head figure: 1, or the head's own maximum), the palette (``viz.attention_cells.colormap``) and their
    ``digest``."""
    values = np.array(matrices, dtype=np.float64)
    if hidden is not None:
        values[:, np.asarray(hidden, dtype=bool)] = np.nan
    finite = values[np.isfinite(values)]
    largest = max(1.0, float(finite.max())) if finite.size else 1.0
    step = 10**-DIGITS if largest * 10**DIGITS <= STEPS else largest / STEPS
    palette = ["#{:02x}{:02x}{:02x}".format(*rgb) for rgb in colormap(colorscale)]
    cells = {
        "kind": "cells", "layer": int(layer), "rows": list(labels), "cols": list(labels if key_labels is None else key_labels),
        "step": step, "heads": [encode_codes(m, step) for m in values],
        "tops": [scale_max(m, per_head_scale) for m in values], "palette": palette, "mask": MASK_COLOR,
    }
    return {**cells, "digest": digest(cells)}


def digest(layer: dict) -> str:
    """A short name of ``layer``'s content (``layer_cells``, ``layer_images``): equal for equal data, so the browser
    keeps what it decoded while only the head changes."""
    packed = [h for h in layer["heads"] if isinstance(h, bytes)]
    text = json.dumps({**layer, "heads": [None if isinstance(h, bytes) else h for h in layer["heads"]]}, sort_keys=True)
    md5 = hashlib.md5(text.encode())
    for head in packed:
        md5.update(head)
    return md5.hexdigest()


def to_wire(data: dict, *, raw: int | None = None, only: int | None = None) -> bytes:
    """``data`` (a layer's ``layer_cells`` with the head to show) as the bytes the head switch receives: the length
    of a JSON text (4 bytes, little-endian), that text (every field but the heads, and each head's size), then the
    heads' packed codes one after another. Head ``raw`` (the one to show) is sent inflated (its planes, named by
    ``raw`` in the text), so the browser draws it at once, without waiting for its ``DecompressionStream``.
    ``only``: send that head alone (every other head's size 0, ``partial`` in the text): the first message after
    another layer is chosen, a sixth to a twelfth of the layer's bytes; the same layer in full follows."""
    heads = list(data["heads"])
    extra = {}
    if only is not None:
        heads = [h if i == only else b"" for i, h in enumerate(heads)]
        extra["partial"] = True
    if raw is not None:
        heads[raw] = zlib.decompress(heads[raw])
        extra["raw"] = raw
    text = json.dumps({**{k: v for k, v in data.items() if k != "heads"}, **extra, "sizes": [len(h) for h in heads]}).encode()
    return b"".join([len(text).to_bytes(4, "little"), text, *heads])


def from_wire(wire: bytes) -> dict:
    """The inverse of ``to_wire`` (what the browser does; the inflated head deflated again, a head not sent None)."""
    size = int.from_bytes(wire[:4], "little")
    data = json.loads(wire[4:4 + size])
    heads, at = [], 4 + size
    for length in data.pop("sizes"):
        heads.append(bytes(wire[at:at + length]) if length else None)
        at += length
    raw = data.pop("raw", None)
    if raw is not None:
        heads[raw] = zlib.compress(heads[raw], 6)
    return {**data, "heads": heads}


def head_image(head: PooledHead, *, colorscale: str, per_head_scale: bool) -> str:
    """A pooled head as the palette PNG data URI the page's pooled head figure draws (``viz.long_heatmap.palette_png``)."""
    return png_source(palette_png(head.values, colorscale=colorscale, top=scale_max(head.values, per_head_scale)))


def layer_images(heads: list[PooledHead | None], images: list[str | None], *, layer: int, dpr: float) -> dict:
    """What the head switch draws a long text's layer from: each head pooled for the device pixels it is drawn at
    (``core.attention_heads.long_attention.pooled_head``) as its ``head_image``, shown one image pixel per device
    pixel at ``dpr``. A head not pooled yet is None in ``heads`` and ``images``: its button is there, the switch
    says it is being computed, and the page sends the layer again once it is pooled."""
    known = next(h for h in heads if h is not None)
    pixels = len(known.col_starts)
    return {
        "kind": "image", "layer": int(layer), "n": known.num_tokens, "pixels": pixels, "css": pixels / dpr,
        "how": known.how, "heads": list(images),
        "rowStarts": [int(x) for x in known.row_starts], "colStarts": [int(x) for x in known.col_starts],
    }
