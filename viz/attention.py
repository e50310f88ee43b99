"""Attention heatmaps: one head large, one layer's heads as a grid, every head as one mosaic image.

Inputs are matrices whose last two axes are ``[n queries, n keys]`` (tokens or words, as
``core.attention.attention_view`` returns them). Rows are queries, columns keys. Cross-attention
of an encoder-decoder is not square (``[t target queries, s source keys]``): pass its column
labels as ``key_labels``. For a
decoder, cells above the diagonal (a token looking at a later token) are drawn as
*masked*, never as zeros. Long inputs stay light: the grid averages blocks of tokens
down to ``GRID_MAX_CELLS`` per side, the overview to ``OVERVIEW_MAX_CELLS`` and ships
it as one 8-bit PNG; only the single-head view has every token's own value.

Bytes: a heatmap past ``CELL_TEXT_MAX`` tokens carries its values as unsigned integer codes
``round(value · 10^digits)`` (1 or 2 bytes a cell instead of float32's 4), and its hover prints
``0.<code>``: exactly the value rounded to the ``digits`` decimals the hover shows (``hover_digits``).
Up to ``CELL_TEXT_MAX`` tokens, where every cell also prints its value at ``CELL_TEXT_DIGITS`` decimals, a head's
values travel as JSON numbers (``printed_numbers``): the shortest decimals that print exactly what the true values
print at both precisions, which deflate packs into about half the bytes of float32 in base64.
Figures carry no Plotly template (Streamlit's frontend applies its own theme to an empty one).
"""

from __future__ import annotations

import base64
import functools
import io
import math
import warnings
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import pandas as pd
import plotly.colors as pcolors
import plotly.graph_objects as go
from PIL import Image

from core.tokens import unique_labels
from core.layers import BLOCK_AXIS
from viz.common import plotly_safe

GRID_MAX_CELLS = 128
OVERVIEW_MAX_CELLS = 64
OVERVIEW_MIN_PIXELS = 48  # small inputs are upscaled so a thumbnail is never a smudge
MASK_COLOR = "#e3e3e3"
MASK_NOTE = "grey = masked: a decoder token cannot attend to later tokens"
CELL_TEXT_MAX = 20  # write the value into each cell up to this many tokens
CELL_TEXT_DIGITS = 2  # decimals a cell's text shows
HEAD_DIGITS, LONG_HEAD_DIGITS, GRID_DIGITS = 4, 3, 2  # decimals a hover shows (one head; one head past LONG_HEAD; grid)
LONG_HEAD = 128  # tokens per side above which the one-head hover shows LONG_HEAD_DIGITS decimals
# Codes travel as JSON numbers up to this many cells (``codes_as_numbers``), as a base64 typed array past it: deflate
# packs the digits tighter, but serialising a list costs the server on every rerun (≈ 10 ms at 128², 90 ms at 512²).
NUMBER_CODES_MAX_CELLS = LONG_HEAD * LONG_HEAD
# Plotly's empty template: Streamlit's frontend fills layout.template.layout with its theme either way, and these
# figures set every colour scale themselves, so they draw as with the default template, 3.6 kB lighter each.
NO_TEMPLATE = "none"


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
    return _SharedNumbers.of(out)


def shown_values(trace) -> np.ndarray:
    """The values a heatmap trace of this module draws and hovers, as floats (codes decoded; masked cells NaN)."""
    scale = (trace.meta or {}).get("z_scale", 1) if isinstance(trace.meta, dict) else 1
    return np.asarray(trace.z, dtype=np.float64) / scale


def _colour_ticks(top: float, scale: int) -> dict:
    """Colour-bar ticks at round values in ``[0, top]``, placed on codes ``value · scale``, labelled with the value."""
    raw = top / 5 if top > 0 else 0.2
    magnitude = 10 ** np.floor(np.log10(raw))
    step = min((m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw), default=raw)
    values = np.arange(0.0, top + step * 1e-6, step)
    return {"tickvals": [float(v * scale) for v in values], "ticktext": [f"{v:.6g}" for v in values]}


def masked_upper(matrices: np.ndarray, causal: bool, hidden: np.ndarray | None = None) -> np.ndarray:
    """float32 copy of ``[..., n, n]`` with the cells above the diagonal set to NaN when ``causal``, and the cells
    ``hidden`` marks (bool, broadcast against ``matrices``: a sliding window's, ``core.attention.window_hidden``)."""
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


def _scale_max(matrix: np.ndarray, per_head: bool) -> float:
    """Top of the colour scale: 1 (attention weights), the data's maximum if larger, or the head's own maximum."""
    top = float(np.nanmax(matrix)) if np.isfinite(matrix).any() else 1.0
    return max(top, 1e-9) if per_head else max(1.0, top)


def _heatmap(
    z: np.ndarray, names: list[str], *, colorscale: str, zmax: float, digits: int, x_names: list[str] | None = None,
    coded: bool = False, colorbar: dict | None = None, **kwargs
) -> dict:
    """A heatmap trace (a dict: ``go.Figure`` validates it once, ``go.Heatmap`` would twice) of ``z`` on
    0..``zmax`` whose hover reads ``query → key: value`` at ``digits`` decimals.

    ``coded``: send ``z`` as ``decimal_codes`` when it can (1–2 bytes a cell, the hover printing ``0.<code>``,
    the same digits); the colour bar keeps its labels in the values' own units.
    """
    safe = [plotly_safe(name) for name in names]
    codes = decimal_codes(z, digits) if coded else None
    scale = 1 if codes is None else 10**digits
    bar = dict(colorbar or {})
    if codes is not None:
        bar |= _colour_ticks(zmax, scale)
    value = f"%{{z:.{digits}f}}" if codes is None else f"0.%{{z:0{digits}d}}"
    return dict(
        type="heatmap",
        z=z if codes is None else codes,
        x=safe if x_names is None else [plotly_safe(name) for name in x_names],
        y=safe,
        colorscale=colorscale,
        zmin=0.0,
        zmax=zmax * scale,
        hoverongaps=False,
        hovertemplate=f"%{{y}} → %{{x}}: {value}<extra></extra>",
        **({"meta": {"z_scale": scale}} if codes is not None else {}),
        **({"colorbar": bar} if bar else {}),
        **{k: v for k, v in kwargs.items() if v is not None},
    )


def _mask_trace(z: np.ndarray, names: list[str], **kwargs) -> dict:
    """Grey cells where ``z`` is NaN (masked), transparent elsewhere; drawn under the data (a trace dict)."""
    safe = [plotly_safe(name) for name in names]
    return dict(
        type="heatmap",
        z=np.isnan(z).astype(np.uint8),
        x=safe,
        y=safe,
        colorscale=[[0, "rgba(0,0,0,0)"], [1, MASK_COLOR]],
        zmin=0,
        zmax=1,
        showscale=False,
        hoverinfo="skip",
        name="masked (future tokens)",
        **kwargs,
    )


def _category_axis(tickangle: int = -45) -> dict:
    # explicit: labels such as "1", "2" must not turn the axis numeric
    return {"type": "category", "showgrid": False, "tickangle": tickangle, "automargin": True}


def head_figure(
    matrix: np.ndarray,
    labels: list[str],
    *,
    title: str,
    causal: bool,
    colorscale: str,
    per_head_scale: bool = False,
    large: bool = False,
    colorbar: str = "weight",
    key_labels: list[str] | None = None,
    axis_titles: tuple[str, str] = ("query (attending)", "key (attended to)"),
    hidden: np.ndarray | None = None,
    window: int | None = None,
) -> go.Figure:
    """One head ``[n, n]`` as a large heatmap, every cell its own (rows = queries); the hover shows
    ``hover_digits`` decimals, exactly the value rounded.

    ``key_labels``: the column labels of a non-square ``[t, s]`` head (cross-attention); ``axis_titles``: (rows, columns).
    ``hidden``: bool ``[n, n]``, cells a sliding window of ``window`` tokens masked (drawn grey, like the future).
    """
    n = matrix.shape[-1]
    key_labels = labels if key_labels is None else key_labels
    if matrix.shape != (len(labels), len(key_labels)) or (causal and len(labels) != n):
        raise ValueError(f"expected a [{len(labels)}, {len(key_labels)}] matrix, got {matrix.shape}")
    z = masked_upper(matrix, causal, hidden)
    names, key_names = unique_labels(labels), unique_labels(key_labels)
    traces = [_mask_trace(z, names)] if causal else []
    traces.append(
        _heatmap(
            z,
            names,
            x_names=key_names,
            colorscale=colorscale,
            zmax=_scale_max(z, per_head_scale),
            digits=hover_digits(*z.shape),
            coded=max(n, len(labels)) > CELL_TEXT_MAX,
            colorbar={"title": {"text": colorbar}},
            texttemplate=f"%{{z:.{CELL_TEXT_DIGITS}f}}" if max(n, len(labels)) <= CELL_TEXT_MAX else None,
        )
    )
    fig = go.Figure(traces, layout={"template": NO_TEMPLATE})
    side = min(1400, max(420, 22 * len(labels) + 200)) + (200 if large else 0)
    fig.update_layout(
        title=plotly_safe(title) + (f"<br><sub>{mask_note(hidden, window)}</sub>" if causal else ""),
        xaxis=_category_axis() | {"title": axis_titles[1], "side": "bottom"},
        yaxis=_category_axis(0) | {"title": axis_titles[0], "autorange": "reversed"},
        height=side,
        margin={"l": 80, "r": 20, "t": 80, "b": 80},
    )
    if max(n, len(labels)) <= CELL_TEXT_MAX:  # the cells print their values too: numbers exact at both precisions
        return _z_as_numbers(fig, {len(traces) - 1: printed_numbers(z, (hover_digits(*z.shape), CELL_TEXT_DIGITS))})
    return codes_as_numbers(fig) if z.size <= NUMBER_CODES_MAX_CELLS else fig


def codes_as_numbers(fig: go.Figure) -> go.Figure:
    """``fig`` with its heatmaps' integer codes (``decimal_codes``) written as JSON numbers rather than a base64
    typed array: the websocket's deflate packs decimal digits about 15 % tighter than base64, which hides the
    bytes' structure from it. A copy built without validating again (the codes were validated as an integer array).
    """
    return _z_as_numbers(fig, {i: _SharedNumbers.of(trace.z) for i, trace in enumerate(fig.data)
                               if isinstance(trace.meta, dict) and "z_scale" in trace.meta})


def _z_as_numbers(fig: go.Figure, numbers: dict[int, np.ndarray]) -> go.Figure:
    """``fig`` with trace ``i``'s z replaced by ``numbers[i]`` (``_SharedNumbers``), without validating again."""
    if not numbers:
        return fig
    spec = fig.to_dict()  # its numpy arrays turned into typed-array dicts: every trace gets its own z back
    for i, (trace, out) in enumerate(zip(fig.data, spec["data"])):
        out["z"] = numbers.get(i, trace.z)
    return go.Figure(spec, _validate=False)


class _SharedNumbers(np.ndarray):
    """Read-only numbers (integer codes, or ``printed_numbers``' floats and Nones) as an object array, which
    plotly.io writes as a JSON list (any other numpy array of numbers becomes a base64 typed array). Figure copies share it: plotly deep-copies a figure's data on every
    ``to_dict``, which for 16,384 Python ints was 10-15 ms per copy and per rerun."""

    @classmethod
    def of(cls, codes) -> "_SharedNumbers":
        shared = np.asarray(codes).astype(object).view(cls)
        shared.setflags(write=False)
        return shared

    def __deepcopy__(self, memo) -> "_SharedNumbers":
        return self


def grid_layout(panels: int, cols: int, titles: list[str], *, font_size: int, h_space: float = 0.03,
                v_space: float = 0.06) -> dict:
    """Layout of ``panels`` subplots in rows of ``cols`` (axes ``x``/``y``, ``x2``/``y2`` …, row by row from the
    top) with a title over each: the domains and title annotations ``make_subplots`` writes, built directly
    (``make_subplots`` costs about 0.1 s for 12 panels, on every layer the grid is drawn for)."""
    rows = -(-panels // cols)
    width, height = (1 - h_space * (cols - 1)) / cols, (1 - v_space * (rows - 1)) / rows
    layout: dict = {"annotations": []}
    for k in range(panels):
        row, col = divmod(k, cols)
        x0, y1 = col * (width + h_space), 1 - row * (height + v_space)
        suffix = str(k + 1) if k else ""
        layout[f"xaxis{suffix}"] = {"domain": [x0, x0 + width], "anchor": f"y{suffix}"}
        layout[f"yaxis{suffix}"] = {"domain": [y1 - height, y1], "anchor": f"x{suffix}"}
        if k < len(titles):
            layout["annotations"].append({"text": titles[k], "x": x0 + width / 2, "y": y1, "xref": "paper", "yref": "paper",
                                          "xanchor": "center", "yanchor": "bottom", "showarrow": False,
                                          "font": {"size": font_size}})
    return layout


def layer_grid_figure(
    matrices: np.ndarray,
    labels: list[str],
    *,
    title: str,
    causal: bool,
    colorscale: str,
    per_head_scale: bool = False,
    head_names: list[str] | None = None,
    large: bool = False,
    max_cells: int = GRID_MAX_CELLS,
    key_labels: list[str] | None = None,
    hidden: np.ndarray | None = None,
    window: int | None = None,
) -> go.Figure:
    """One layer's heads ``[heads, n, n]`` (or ``[heads, t, s]`` with ``key_labels``) as a grid of heatmaps;
    long inputs are block-averaged to ``max_cells``. ``hidden``/``window``: as ``head_figure``'s."""
    heads, n = matrices.shape[0], matrices.shape[-1]
    key_labels = labels if key_labels is None else key_labels
    if matrices.shape[1:] != (len(labels), len(key_labels)) or (causal and len(labels) != n):
        raise ValueError(f"expected [heads, {len(labels)}, {len(key_labels)}], got {matrices.shape}")
    z, row_bins, bins = block_mean_2d(masked_upper(matrices, causal, hidden), max_cells)
    names, key_names = bin_labels(labels, row_bins), bin_labels(key_labels, bins)
    head_names = head_names or [f"head {h}" for h in range(heads)]
    cols = min(heads, 3 if large else 4)
    rows = -(-heads // cols)
    top = _scale_max(z, False)
    traces = []
    for h in range(heads):
        where = {"xaxis": f"x{h + 1 if h else ''}", "yaxis": f"y{h + 1 if h else ''}"}
        if causal:
            traces.append(_mask_trace(z[h], names) | where)
        traces.append(
            _heatmap(
                z[h],
                names,
                x_names=key_names,
                colorscale=colorscale,
                zmax=_scale_max(z[h], True) if per_head_scale else top,
                digits=GRID_DIGITS,
                coded=max(z.shape[1:]) > CELL_TEXT_MAX,
                showscale=not per_head_scale and h == 0,
                colorbar={"title": {"text": "weight"}},
            ) | where
        )
    layout = grid_layout(heads, cols, [plotly_safe(name) for name in head_names], font_size=22 if large else 14)
    fig = go.Figure(traces, layout=layout | {"template": NO_TEMPLATE})
    fig.update_xaxes(type="category", showticklabels=len(bins) <= 40, tickangle=-90, showgrid=False)
    fig.update_yaxes(type="category", showticklabels=len(row_bins) <= 40, autorange="reversed", showgrid=False)
    subtitle = []
    if len(bins) < n or len(row_bins) < len(labels):
        step = max(row_bins[0][1] - row_bins[0][0], bins[0][1] - bins[0][0]) + 1
        subtitle.append(f"each cell averages {step} × {step} tokens")
    if per_head_scale:
        subtitle.append("each head coloured to its own maximum")
    if causal:
        subtitle.append(mask_note(hidden, window))
    fig.update_layout(
        title=plotly_safe(title) + (f"<br><sub>{'; '.join(subtitle)}</sub>" if subtitle else ""),
        height=rows * (420 if large else 300) + 120,
        margin={"l": 40, "r": 20, "t": 110, "b": 40},
    )
    return fig


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
        top = _scale_max(matrices, False)
    scaled = np.nan_to_num(np.clip(matrices / top, 0.0, 1.0), nan=0.0)
    return np.round(scaled * (levels - 1)).astype(np.uint8)


def mosaic_png(matrices: np.ndarray, *, colorscale: str, per_head_scale: bool, gap: int = 2) -> tuple[bytes, int]:
    """Every head ``[layers, heads, r, c]`` tiled into one palette PNG (layers = rows, heads = columns).

    Masked (NaN) cells are grey, gaps transparent. Returns ``(png bytes, pixels per cell)``.
    """
    layers, heads, r, c = matrices.shape
    zoom = max(1, -(-OVERVIEW_MIN_PIXELS // max(r, c)))
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


def overview_figure(
    matrices: np.ndarray,
    *,
    title: str,
    causal: bool,
    colorscale: str,
    per_head_scale: bool = False,
    head_names: list[str] | None = None,
    large: bool = False,
    max_cells: int = OVERVIEW_MAX_CELLS,
    gap: int = 2,
    hidden: np.ndarray | None = None,
) -> go.Figure:
    """All layers × heads ``[layers, heads, n, n]`` as one image of thumbnails (8-bit, ≤ ``max_cells`` per side).

    One picture instead of layers × heads subplots: a few hundred kB at any length. An
    invisible coarse grid on top answers hover with "layer L, head H". ``hidden``: bool ``[layers, 1, n, n]``, the
    cells each layer's sliding window masked (``core.attention.window_hidden``), drawn as masked.
    """
    layers, heads = matrices.shape[:2]
    small, row_bins, bins = block_mean_2d(masked_upper(matrices, causal, hidden), max_cells)
    png, zoom = mosaic_png(small, colorscale=colorscale, per_head_scale=per_head_scale, gap=gap)
    pitch, row_pitch = len(bins) * zoom + gap, len(row_bins) * zoom + gap
    head_names = head_names or [str(h) for h in range(heads)]
    centres_x = [h * pitch + (pitch - gap) / 2 for h in range(heads)]
    centres_y = [layer * row_pitch + (row_pitch - gap) / 2 for layer in range(layers)]
    where = np.array([[[layer, h] for h in range(heads)] for layer in range(layers)])
    notes = []
    if len(bins) < matrices.shape[-1] or len(row_bins) < matrices.shape[-2]:
        step = max(row_bins[0][1] - row_bins[0][0], bins[0][1] - bins[0][0]) + 1
        notes.append(f"each pixel averages {step} × {step} tokens")
    notes.append("each head coloured to its own maximum" if per_head_scale else "colour 0 → 1 fixed")
    if causal:
        notes.append(mask_note(hidden))
    width_px = heads * pitch
    # Built on every new text, so without plotly's property validation (10-15 ms of the page view): every property
    # below is already in the form validation would give it (tests/test_viz_attention.py checks that it is).
    return go.Figure(
        data=[
            {"type": "image", "source": "data:image/png;base64," + base64.b64encode(png).decode("ascii"),
             "x0": 0, "y0": 0, "dx": 1, "dy": 1, "hoverinfo": "skip"},
            {"type": "heatmap", "z": np.zeros((layers, heads), dtype=np.uint8), "x": centres_x, "y": centres_y,
             "customdata": where, "opacity": 0, "showscale": False,
             "hovertemplate": "layer %{customdata[0]}, head %{customdata[1]}<extra></extra>"},
        ],
        layout={
            "title": {"text": f"{plotly_safe(title)}<br><sub>{'; '.join(notes)}</sub>"},
            "xaxis": {
                "title": {"text": "head"},
                "tickmode": "array",
                "tickvals": centres_x,
                "ticktext": [plotly_safe(name) for name in head_names],
                "showgrid": False,
                "zeroline": False,
                "range": [-gap, width_px],
            },
            "yaxis": {
                "title": {"text": BLOCK_AXIS},
                "tickmode": "array",
                "tickvals": centres_y,
                "ticktext": [str(layer) for layer in range(layers)],
                "showgrid": False,
                "zeroline": False,
                "scaleanchor": "x",
                # reversed (layer 0 on top) and fixed, as x is, so the height it is drawn at is known before drawing
                "range": [layers * row_pitch, -gap],
            },
            "height": min(1600, max(300, int(layers * (110 if large else 80)) + 160)),
            "margin": {"l": 70, "r": 20, "t": 90, "b": 50},
        },
        _validate=False,
    )


def matrix_table(matrix: np.ndarray, labels: list[str], *, causal: bool, key_labels: list[str] | None = None,
                 hidden: np.ndarray | None = None) -> pd.DataFrame:
    """``[n, n]`` (or ``[t, s]`` with ``key_labels``) at full precision as a wide table: a ``query`` column,
    then one column per key (labels made unique); masked cells of a decoder (and ``hidden`` ones) are empty."""
    names = unique_labels(labels)
    key_names = names if key_labels is None else unique_labels(key_labels)
    table = pd.DataFrame(masked_upper(matrix, causal, hidden).astype(np.float64), columns=key_names)
    table.insert(0, "query", names)
    return table


def cells_table(
    matrices: np.ndarray,
    labels: list[str],
    *,
    causal: bool,
    max_cells: int,
    outer: dict[str, list],
    key_labels: list[str] | None = None,
    hidden: np.ndarray | None = None,
) -> pd.DataFrame:
    """The numbers a grid or overview draws: ``[*outer, n, n]`` block-averaged to ``max_cells``, as one wide table.

    ``outer`` names the leading axes in order, e.g. ``{"layer": [...], "head": [...]}``; each
    row is one query (or block of queries) of one matrix; masked cells (and ``hidden`` ones) are empty.
    """
    small, row_bins, bins = block_mean_2d(masked_upper(matrices, causal, hidden), max_cells)
    names = bin_labels(labels, row_bins)
    key_names = bin_labels(labels if key_labels is None else key_labels, bins)
    c, r = len(key_names), len(names)
    flat = small.reshape(-1, c)
    table = pd.DataFrame(np.round(flat.astype(np.float64), 6), columns=key_names)
    table.insert(0, "query", names * (len(flat) // r))
    index = np.indices(small.shape[:-2]).reshape(len(outer), -1)  # [axes, matrices]
    for position, (column, values) in enumerate(reversed(list(outer.items()))):
        axis = len(outer) - 1 - position
        table.insert(0, column, np.repeat(np.asarray(values, dtype=object)[index[axis]], r))
    return table
