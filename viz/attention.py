"""Attention heatmaps: one head large, one layer's heads as a grid, every head as one mosaic image.

Inputs are matrices whose last two axes are ``[n queries, n keys]`` (tokens or words, as
``core.attention_heads.attention.attention_view`` returns them). Rows are queries, columns keys. Cross-attention
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
Figures carry no Plotly template (Streamlit's frontend applies its own theme to an empty one). The numbers a figure
draws, as the tables its CSV download holds, are in ``viz.attention_tables``.
"""

from __future__ import annotations

import base64

import numpy as np
import plotly.graph_objects as go

from core.model.layers import BLOCK_AXIS
from core.model.tokens import unique_labels
from viz.attention_cells import (
    GRID_DIGITS,
    LONG_HEAD,
    MASK_COLOR,
    SharedNumbers,
    bin_labels,
    block_mean_2d,
    colour_ticks,
    decimal_codes,
    hover_digits,
    mask_note,
    masked_upper,
    mosaic_png,
    printed_numbers,
    scale_max,
)
from viz.common import plotly_safe

GRID_MAX_CELLS = 128
OVERVIEW_MAX_CELLS = 64
CELL_TEXT_MAX = 20  # write the value into each cell up to this many tokens
CELL_TEXT_DIGITS = 2  # decimals a cell's text shows
# Codes travel as JSON numbers up to this many cells (``codes_as_numbers``), as a base64 typed array past it: deflate
# packs the digits tighter, but serialising a list costs the server on every rerun (≈ 10 ms at 128², 90 ms at 512²).
NUMBER_CODES_MAX_CELLS = LONG_HEAD * LONG_HEAD
# Plotly's empty template: Streamlit's frontend fills layout.template.layout with its theme either way, and these
# figures set every colour scale themselves, so they draw as with the default template, 3.6 kB lighter each.
NO_TEMPLATE = "none"


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
        bar |= colour_ticks(zmax, scale)
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
            zmax=scale_max(z, per_head_scale),
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
    return _z_as_numbers(fig, {i: SharedNumbers.of(trace.z) for i, trace in enumerate(fig.data)
                               if isinstance(trace.meta, dict) and "z_scale" in trace.meta})


def _z_as_numbers(fig: go.Figure, numbers: dict[int, np.ndarray]) -> go.Figure:
    """``fig`` with trace ``i``'s z replaced by ``numbers[i]`` (``viz.attention_cells.SharedNumbers``), without validating again."""
    if not numbers:
        return fig
    spec = fig.to_dict()  # its numpy arrays turned into typed-array dicts: every trace gets its own z back
    for i, (trace, out) in enumerate(zip(fig.data, spec["data"])):
        out["z"] = numbers.get(i, trace.z)
    return go.Figure(spec, _validate=False)


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
    top = scale_max(z, False)
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
                zmax=scale_max(z[h], True) if per_head_scale else top,
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
    cells each layer's sliding window masked (``core.attention_heads.attention.window_hidden``), drawn as masked.

    One map per layer (``heads == 1``, attention rollout) is drawn as a row, layers across, instead of one narrow
    column in a wide figure.
    """
    if matrices.shape[1] == 1 and matrices.shape[0] > 1:
        return _overview_row(matrices, title=title, causal=causal, colorscale=colorscale,
                             per_head_scale=per_head_scale, name=(head_names or ["all heads"])[0], large=large,
                             max_cells=max_cells, gap=gap, hidden=hidden)
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


def _overview_row(matrices: np.ndarray, *, title: str, causal: bool, colorscale: str, per_head_scale: bool, name: str,
                  large: bool, max_cells: int, gap: int, hidden: np.ndarray | None) -> go.Figure:
    """``overview_figure`` for one map per layer ``[layers, 1, n, n]``: the maps side by side, layer 0 first."""
    layers = matrices.shape[0]
    figure = overview_figure(matrices.transpose(1, 0, 2, 3), title=title, causal=causal, colorscale=colorscale, per_head_scale=per_head_scale,
                             head_names=[str(layer) for layer in range(layers)], large=large, max_cells=max_cells,
                             gap=gap, hidden=None if hidden is None else hidden.transpose(1, 0, 2, 3))
    figure.update_layout(xaxis_title_text=BLOCK_AXIS, yaxis={"showticklabels": False, "title": None}, margin_l=20,
                         height=int((260 if large else 200) + 900 / layers))  # the title names the one row
    return figure.update_traces(customdata=np.arange(layers)[None, :, None], selector={"type": "heatmap"},
                                hovertemplate=f"{plotly_safe(name)} through layer %{{customdata[0]}}<extra></extra>")
