"""The cells of the attention figures: how their values are coded and printed (exact at the decimals shown), which
cells are masked (a decoder's future, a sliding window) and drawn grey, how long inputs are averaged into blocks,
and the palette PNG the all-heads overview is drawn as."""

from __future__ import annotations

import functools
import io
import math
import warnings
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import plotly.colors as pcolors
from PIL import Image

from core.model.tokens import unique_labels

OVERVIEW_MIN_PIXELS = 48  # small inputs are upscaled so a thumbnail is never a smudge
MASK_COLOR = "#e3e3e3"
MASK_NOTE = "grey = masked: a decoder token cannot attend to later tokens"
HEAD_DIGITS, LONG_HEAD_DIGITS, GRID_DIGITS = 4, 3, 2  # decimals a hover shows (one head; one head past LONG_HEAD; grid)
LONG_HEAD = 128  # tokens per side above which the one-head hover shows LONG_HEAD_DIGITS decimals


class SharedNumbers(np.ndarray):
    """Read-only numbers (integer codes, or ``printed_numbers``' floats and Nones) as an object array, which
    plotly.io writes as a JSON list (any other numpy array of numbers becomes a base64 typed array). Figure copies
    share it: plotly deep-copies a figure's data on every ``to_dict``, which for 16,384 Python ints was 10-15 ms per
    copy and per rerun."""

    @classmethod
    def of(cls, codes) -> SharedNumbers:
        shared = np.asarray(codes).astype(object).view(cls)
        shared.setflags(write=False)
        return shared

    def __deepcopy__(self, memo) -> SharedNumbers:
        return self


def scale_max(matrix: np.ndarray, per_head: bool) -> float:
    """Top of the colour scale: 1 (attention weights), the data's maximum if larger, or the head's own maximum."""
    top = float(np.nanmax(matrix)) if np.isfinite(matrix).any() else 1.0
    return max(top, 1e-9) if per_head else max(1.0, top)


def hover_digits(rows: int, cols: int) -> int:
    """Decimals the one-head hover shows for a ``[rows, cols]`` head: what a reader reads and what the bytes allow."""
    return HEAD_DIGITS if max(rows, cols) <= LONG_HEAD else LONG_HEAD_DIGITS


def decimal_codes(values: np.ndarray, digits: int) -> np.ndarray | None:
    """``values`` rounded to ``digits`` decimals as unsigned integer codes ``round(value · 10^digits)`` (half up,
    as the browser rounds), uint8 when every code fits, else uint16; None when a cell is masked (NaN),
    negative, or rounds to 1 or more (the hover ``0.<code>`` could not print it).

    float32 × 10^digits is exact in float64 for ``digits`` ≤ 4, so the code is the true value rounded, not an
    approximation of it.
    """
    if digits > 4:
        raise ValueError("at most 4 decimals: float32 × 10^digits must be exact in float64")
    values = np.asarray(values, dtype=np.float32).astype(np.float64)
    if values.size == 0 or not np.isfinite(values).all() or (values < 0).any():
        return None
    codes = np.floor(values * 10**digits + 0.5)
    top = codes.max()
    if top >= 10**digits:
        return None
    return codes.astype(np.uint8 if top < 256 else np.uint16)


def _to_fixed(value: Decimal, digits: int) -> Decimal:
    """``value`` rounded as the browser's ``toFixed`` (d3-format's ``f``) rounds: its exact value, halves away from 0."""
    return value.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)


def printed_numbers(values: np.ndarray, digits: tuple[int, ...]) -> np.ndarray:
    """``values`` (float32) as the shortest decimal numbers that print, at each of ``digits`` decimals, exactly what
    the float32 values themselves print (a read-only object array of Python floats, None where a value is NaN, which
    plotly writes as a JSON list).

    Usually the value rounded to ``max(digits)`` decimals; where that rounding would tip a shorter one across a half
    (0.124996 rounds to 0.1250, which prints 0.13 at 2 decimals, the true value 0.12) a decimal or two more. Each
    number is within ``0.5 · 10^-max(digits)`` of its value, far below a visible colour step.
    """
    values = np.asarray(values, dtype=np.float32)
    out = np.empty(values.shape, dtype=object)
    most = max(digits)
    for index, value in np.ndenumerate(values):
        x = float(value)
        if not math.isfinite(x):
            out[index] = None
            continue
        exact = Decimal(x)
        printed = [_to_fixed(exact, d) for d in digits]
        for places in range(most, 18):
            number = float(_to_fixed(exact, places))
            if all(_to_fixed(Decimal(number), d) == p for d, p in zip(digits, printed)):
                break
        else:  # pragma: no cover - 17 significant decimals always print as the value itself
            number = x
        out[index] = number
    return SharedNumbers.of(out)


def shown_values(trace) -> np.ndarray:
    """The values a heatmap trace of this module draws and hovers, as floats (codes decoded; masked cells NaN)."""
    scale = (trace.meta or {}).get("z_scale", 1) if isinstance(trace.meta, dict) else 1
    return np.asarray(trace.z, dtype=np.float64) / scale


def colour_ticks(top: float, scale: int) -> dict:
    """Colour-bar ticks at round values in ``[0, top]``, placed on codes ``value · scale``, labelled with the value."""
    raw = top / 5 if top > 0 else 0.2
    magnitude = 10 ** np.floor(np.log10(raw))
    step = min((m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw), default=raw)
    values = np.arange(0.0, top + step * 1e-6, step)
    return {"tickvals": [float(v * scale) for v in values], "ticktext": [f"{v:.6g}" for v in values]}


def masked_upper(matrices: np.ndarray, causal: bool, hidden: np.ndarray | None = None) -> np.ndarray:
    """float32 copy of ``[..., n, n]`` with the cells above the diagonal set to NaN when ``causal``, and the cells
    ``hidden`` marks (bool, broadcast against ``matrices``: a sliding window's, ``core.attention_heads.attention.window_hidden``)."""
    out = np.array(matrices, dtype=np.float32, copy=True)
    if causal:
        n = out.shape[-1]
        out[..., np.triu(np.ones((n, n), dtype=bool), k=1)] = np.nan
    if hidden is not None:
        out[np.broadcast_to(hidden, out.shape)] = np.nan
    return out


def mask_note(hidden: np.ndarray | None, window: int | None = None) -> str:
    """What a figure's grey cells are: the future, and tokens further back than a sliding window when it hides some."""
    if hidden is None or not hidden.any():
        return MASK_NOTE
    back = f"more than {window - 1} back" if window else "outside a layer's sliding window"
    return f"{MASK_NOTE}, nor to tokens {back} (sliding window)"


def block_mean(matrices: np.ndarray, max_cells: int) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Average ``[..., n, n]`` over square blocks of ``ceil(n / max_cells)`` units.

    Returns ``[..., c, c]`` with ``c <= max_cells`` and each block's ``(first, last)`` unit.
    NaN (masked) cells are left out of a block's mean; an all-masked block stays NaN.
    """
    small, bins, _ = block_mean_2d(matrices, max_cells)
    return small, bins


def block_mean_2d(matrices: np.ndarray, max_cells: int) -> tuple[np.ndarray, list[tuple[int, int]], list[tuple[int, int]]]:
    """``block_mean`` for ``[..., r, c]`` that need not be square: blocks of the same ``step`` units on both
    axes, ``step = ceil(max(r, c) / max_cells)``. Returns the means and the row and column bins."""
    r, n = matrices.shape[-2], matrices.shape[-1]
    step = max(1, -(-max(r, n) // max_cells))
    row_bins = [(start, min(start + step, r) - 1) for start in range(0, r, step)]
    bins = [(start, min(start + step, n) - 1) for start in range(0, n, step)]
    if step == 1:
        return np.asarray(matrices, dtype=np.float32), row_bins, bins
    a, c = len(row_bins), len(bins)
    padded = np.full(matrices.shape[:-2] + (a * step, c * step), np.nan, dtype=np.float32)
    padded[..., :r, :n] = matrices
    blocks = padded.reshape(matrices.shape[:-2] + (a, step, c, step))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN blocks are meant to stay NaN
        return np.nanmean(blocks, axis=(-3, -1)).astype(np.float32), row_bins, bins


def bin_labels(labels: list[str], bins: list[tuple[int, int]]) -> list[str]:
    """Unique axis labels: the unit's own label, or ``first…last`` for a block of several units."""
    names = unique_labels(labels)
    return [names[a] if a == b else f"{names[a]}…{names[b]}" for a, b in bins]


PNG_COMPRESS_LEVEL = 6
LEVELS = 254  # palette indices 0..253 are colours, 254 is the mask, 255 the transparent gap
MASK_INDEX, GAP_INDEX = 254, 255


@functools.lru_cache(maxsize=16)
def colormap(colorscale: str, levels: int = LEVELS) -> np.ndarray:
    """uint8 ``[levels, 3]``: the Plotly colour scale sampled at ``levels`` evenly spaced points (read-only, cached)."""
    colours = pcolors.sample_colorscale(colorscale, list(np.linspace(0.0, 1.0, levels)), colortype="rgb")
    table = np.array([pcolors.unlabel_rgb(c) for c in colours], dtype=np.float64).round().astype(np.uint8)
    table.setflags(write=False)
    return table


def quantise(matrices: np.ndarray, per_head_scale: bool, levels: int = LEVELS) -> np.ndarray:
    """``[layers, heads, c, c]`` floats → uint8 ``0..levels-1`` (NaN → 0): 0..1 fixed, or each head to its maximum.

    A fixed scale stretches to the global maximum when values exceed 1 (e.g. norm-weighted attention).
    """
    if per_head_scale:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            top = np.nanmax(matrices, axis=(-2, -1), keepdims=True)
        top = np.where(np.isfinite(top) & (top > 0), top, 1.0)
    else:
        top = scale_max(matrices, False)
    scaled = np.nan_to_num(np.clip(matrices / top, 0.0, 1.0), nan=0.0)
    return np.round(scaled * (levels - 1)).astype(np.uint8)


def mosaic_png(matrices: np.ndarray, *, colorscale: str, per_head_scale: bool, gap: int = 2,
               min_pixels: int = OVERVIEW_MIN_PIXELS) -> tuple[bytes, int]:
    """Every head ``[layers, heads, r, c]`` tiled into one palette PNG (layers = rows, heads = columns), each cell
    scaled up to at least ``min_pixels`` per side (1: as they are).

    Masked (NaN) cells are grey, gaps transparent. Returns ``(png bytes, pixels per cell)``.
    """
    layers, heads, r, c = matrices.shape
    zoom = max(1, -(-min_pixels // max(r, c)))
    tiles = np.where(np.isnan(matrices), MASK_INDEX, quantise(matrices, per_head_scale)).astype(np.uint8)
    tiles = tiles.repeat(zoom, axis=2).repeat(zoom, axis=3)
    height, side = r * zoom, c * zoom
    image = np.full((layers * (height + gap), heads * (side + gap)), GAP_INDEX, dtype=np.uint8)
    for layer in range(layers):
        for head in range(heads):
            y, x = layer * (height + gap), head * (side + gap)
            image[y : y + height, x : x + side] = tiles[layer, head]
    palette = np.vstack([colormap(colorscale), pcolors.hex_to_rgb(MASK_COLOR), (255, 255, 255)]).astype(np.uint8)
    picture = Image.fromarray(image, "P")
    picture.putpalette(palette.ravel().tolist())
    buffer = io.BytesIO()
    # zlib level 6: "optimize" (level 9) costs up to 0.6 s per overview at 128 tokens for 6 % fewer bytes.
    picture.save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL, transparency=GAP_INDEX)
    return buffer.getvalue(), zoom
