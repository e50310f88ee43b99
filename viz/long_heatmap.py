"""A long text's attention: one head at screen resolution, a zoomed region token by token, every head as thumbnails.

Inputs come from ``core.attention_heads.long_attention`` (``PooledHead``, ``Zoom``, ``Thumbnails``). The pooled head and the
thumbnails travel as one palette PNG each (an image trace: a few tens of kB whatever the length, where a heatmap of
560 × 560 values is over 400 kB of JSON), with a colour bar from a heatmap of two cells outside the plotted range.
Axes count token positions from 0; pixel ``i`` of a pooled head covers positions ``i·step .. i·step + step − 1``,
drawn exactly over them. Masked blocks and cells (a decoder's future, a sliding window) are grey.
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pandas as pd
import plotly.colors as pcolors
import plotly.graph_objects as go
from PIL import Image

from core.attention_heads.long_attention import PooledHead, Thumbnails, Zoom
from core.attention_heads.pooling import tokens_per_pixel
from core.model.layers import BLOCK_AXIS
from viz.attention import NO_TEMPLATE, head_figure
from viz.attention_cells import MASK_COLOR, MASK_INDEX, PNG_COMPRESS_LEVEL, colormap, mosaic_png, quantise, scale_max
from viz.attention_tables import matrix_table
from viz.common import plotly_safe

POOL_WORDS = {"max": "the maximum", "sum": "the sum"}
HOVER_POINTS = "layer %{customdata[0]}, head %{customdata[1]}: click to open<extra></extra>"


def palette_png(values: np.ndarray, *, colorscale: str, top: float) -> bytes:
    """``values`` ``[r, c]`` as a palette PNG on 0..``top`` (NaN: the mask's grey)."""
    scaled = quantise(np.clip(np.nan_to_num(values, nan=0.0) / top, 0.0, 1.0)[None, None], False)[0, 0]
    image = np.where(np.isnan(values), MASK_INDEX, scaled).astype(np.uint8)
    palette = np.vstack([colormap(colorscale), pcolors.hex_to_rgb(MASK_COLOR), (255, 255, 255)]).astype(np.uint8)
    picture = Image.fromarray(image, "P")
    picture.putpalette(palette.ravel().tolist())
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buffer.getvalue()


def png_source(png: bytes) -> str:
    """``png`` as a data URI (drawn without any request)."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _colour_bar(top: float, colorscale: str, title: str) -> dict:
    """A heatmap of two cells far outside the plotted range: only its colour bar shows."""
    return {"type": "heatmap", "z": [[0.0, top]], "x": [-1e9, -1e9 + 1], "y": [-1e9], "zmin": 0.0, "zmax": top,
            "colorscale": colorscale, "hoverinfo": "skip", "colorbar": {"title": {"text": title}}}


HEAD_MARGINS = {"l": 80, "r": 110, "t": 100, "b": 60, "autoexpand": False}  # the plot area stays its exact size
THUMB_MARGINS = {"l": 70, "r": 20, "t": 100, "b": 50, "autoexpand": False}


def pooled_note(head: PooledHead, dpr: float = 1.0) -> str:
    """How many tokens a pixel of ``head`` covers, in words from its numbers."""
    n, pixels = head.num_tokens, len(head.col_starts)
    fewest, most = head.per_pixel
    screen = f"{n:,} tokens on {pixels:,} screen pixels" + (f" ({pixels / dpr:,.0f} CSS pixels at {dpr:g}×)" if dpr != 1 else "")
    if pixels >= n:
        return f"every token pair its own cell, drawn {pixels / n:.1f} pixels wide: {screen}"
    covers = f"{fewest}" if fewest == most else f"{fewest} or {most}"
    return f"each pixel is {POOL_WORDS[head.how]} of the weights it covers, {covers} tokens each way: {screen}"


def exact_layout(width_px: int, height_px: int, dpr: float, margins: dict) -> dict:
    """Layout sizes whose plot area is exactly an image of ``width_px`` × ``height_px`` device pixels, drawn one
    image pixel per screen pixel at device pixel ratio ``dpr`` (``margins`` do not grow: ``autoexpand`` off)."""
    return {"width": width_px / dpr + margins["l"] + margins["r"], "height": height_px / dpr + margins["t"] + margins["b"],
            "autosize": False, "margin": margins}


def pooled_head_figure(head: PooledHead, *, title: str, colorscale: str, per_head_scale: bool = False,
                       large: bool = False, region: tuple[range, range] | None = None, masked_note: str = "",
                       dpr: float = 1.0) -> go.Figure:
    """One head at the device pixels it is drawn at (``core.attention_heads.long_attention.pooled_head``), queries down
    and keys across, both in token positions: the plot area is exactly the image's pixels at ``dpr`` (``exact_layout``),
    so the browser resamples nothing. ``region`` ``(queries, keys)``: the zoomed region, outlined."""
    n, pixels = head.num_tokens, len(head.col_starts)
    top = scale_max(head.values, per_head_scale)
    dx = n / pixels  # positions per pixel: the image spans the axis range [-0.5, n - 0.5] exactly
    notes = [pooled_note(head, dpr), "each head coloured to its own maximum" if per_head_scale else
             f"colour 0 → {top:.3g} fixed"] + ([masked_note] if masked_note else [])
    shapes = []
    if region is not None:
        queries, keys = region
        shapes.append({"type": "rect", "x0": keys.start - 0.5, "x1": keys.stop - 0.5, "y0": queries.start - 0.5,
                       "y1": queries.stop - 0.5, "line": {"color": "#d62728", "width": 2}, "xref": "x", "yref": "y"})
    image = {"type": "image", "source": png_source(palette_png(head.values, colorscale=colorscale, top=top)),
             "x0": -0.5 + dx / 2, "y0": -0.5 + dx / 2, "dx": dx, "dy": dx,
             "hovertemplate": "query ≈ %{y:.0f}, key ≈ %{x:.0f}<extra></extra>",
             # a label colour of its own: from a PNG's pixel Plotly takes a byte array it cannot read as a colour
             "hoverlabel": {"bgcolor": "white", "font": {"color": "black"}}}
    bar = _colour_bar(top, colorscale, f"{head.how} of weights")
    # Two invisible points at the corners: a box dragged on the plot (dragmode "select") needs a trace it can select
    # from before the browser reports it; the box's bounds, not the points, choose the zoomed region.
    corners = {"type": "scatter", "x": [0, n - 1], "y": [0, n - 1], "mode": "markers", "marker": {"opacity": 0},
               "hoverinfo": "skip", "showlegend": False}
    return go.Figure(
        data=[image, bar, corners],
        layout={
            "template": NO_TEMPLATE,
            "title": {"text": f"{plotly_safe(title)}<br><sub>{'; '.join(notes)}</sub>"},
            "xaxis": {"title": {"text": "key position (attended to)"}, "range": [-0.5, n - 0.5], "showgrid": False,
                      "zeroline": False},
            "yaxis": {"title": {"text": "query position (attending)"}, "range": [n - 0.5, -0.5], "showgrid": False,
                      "zeroline": False},
            "shapes": shapes,
            "dragmode": "select",
            **exact_layout(pixels, pixels, dpr, HEAD_MARGINS),
        },
    )


def zoom_labels(labels: list[str], positions: range) -> list[str]:
    """Each token's label with its position in the text: ``·the (1031)``."""
    return [f"{label} ({p})" for label, p in zip(labels, positions, strict=True)]


def zoom_figure(zoomed: Zoom, *, title: str, colorscale: str, per_head_scale: bool = False, large: bool = False,
                masked_note: str = "") -> go.Figure:
    """The zoomed region every cell its own, labelled by token and position (``viz.attention.head_figure``'s cells
    and hover); masked cells grey."""
    rows, cols = zoom_labels(zoomed.query_labels, zoomed.queries), zoom_labels(zoomed.key_labels, zoomed.keys)
    masked = bool(zoomed.hidden.any())
    fig = head_figure(zoomed.values, rows, key_labels=cols, title=title, causal=False, colorscale=colorscale,
                      per_head_scale=per_head_scale, large=large, hidden=zoomed.hidden if masked else None)
    if masked:
        # validated (so its cells travel as a base64 byte array, not a JSON list) and drawn first, under the weights
        fig.add_trace(go.Heatmap(z=zoomed.hidden.astype(np.uint8), x=fig.data[0].x, y=fig.data[0].y,
                                 colorscale=[[0, "rgba(0,0,0,0)"], [1, MASK_COLOR]], zmin=0, zmax=1, showscale=False,
                                 hoverinfo="skip", name="masked"))
        fig.data = (fig.data[-1], *fig.data[:-1])
        if masked_note:
            fig.update_layout(title_text=f"{fig.layout.title.text}<br><sub>{masked_note}</sub>")
    return fig


def zoom_table(zoomed: Zoom) -> pd.DataFrame:
    """The zoomed cells at full precision: a ``query`` column (label and position), one column per key; masked cells
    empty."""
    return matrix_table(zoomed.values, zoom_labels(zoomed.query_labels, zoomed.queries), causal=False,
                        key_labels=zoom_labels(zoomed.key_labels, zoomed.keys), hidden=zoomed.hidden)


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def pooled_table(head: PooledHead) -> pd.DataFrame:
    """The pooled pixels as drawn: a ``queries`` column (the positions a pixel row covers), one column per pixel
    column named by its key positions; masked pixels empty."""
    n = head.num_tokens
    ends = np.append(head.row_starts[1:], n) - 1
    col_ends = np.append(head.col_starts[1:], n) - 1
    names = [f"keys {_span(a, b)}" for a, b in zip(head.col_starts, col_ends, strict=True)]
    table = pd.DataFrame(head.values.astype(np.float64), columns=names)
    table.insert(0, "queries", [_span(a, b) for a, b in zip(head.row_starts, ends, strict=True)])
    return table


def thumbnails_note(thumbs: Thumbnails, dpr: float = 1.0) -> str:
    n, rows, pixels = thumbs.num_tokens, thumbs.rows, len(thumbs.col_starts)
    fewest, most = tokens_per_pixel(thumbs.col_starts, n)
    at = f" at {dpr:g}×" if dpr != 1 else ""
    if pixels >= n:
        return f"every query and key its own cell, {pixels / n:.1f} screen pixels wide{at}"
    covers = f"{fewest}" if fewest == most else f"{fewest} or {most}"
    return (f"each thumbnail row is one query in about every {n / len(rows):.1f} ({rows[0]}, {rows[1]}, …), each pixel "
            f"{POOL_WORDS[thumbs.how]} of its weights on {covers} keys: {n:,} tokens on {pixels} screen pixels{at}")


THUMB_GAP = 2  # device pixels between thumbnails
THUMB_MOST_CSS = 120  # a thumbnail's side at most, in CSS pixels
THUMB_FEWEST = 16  # device pixels per side at least (a phone's column holds 9 heads of 31 pixels)


def thumbnail_pixels(width_css: float, height_css: float, heads: int, layers: int, dpr: float) -> int:
    """Device pixels per side of each thumbnail so that ``heads`` across and ``layers`` down, with their gaps, fit a
    plot area of ``width_css`` × ``height_css`` CSS pixels at device pixel ratio ``dpr``."""
    across = int(width_css * dpr) // heads - THUMB_GAP
    down = int(height_css * dpr) // layers - THUMB_GAP
    return max(THUMB_FEWEST, min(across, down, int(THUMB_MOST_CSS * dpr)))


def thumbnails_figure(thumbs: Thumbnails, *, title: str, colorscale: str, per_head_scale: bool = False,
                      large: bool = False, selected: tuple[int, int] | None = None, dpr: float = 1.0) -> go.Figure:
    """Every head of ``thumbs.layers`` as one picture (layers down, heads across), its plot area exactly the
    picture's pixels at ``dpr`` (``exact_layout``: nothing resampled); a click on a thumbnail selects it (each
    point's ``customdata`` is ``[layer, head]``); ``selected`` ``(layer, head)`` is outlined."""
    gap = THUMB_GAP
    layers, heads = thumbs.values.shape[:2]
    png, zoom = mosaic_png(thumbs.values, colorscale=colorscale, per_head_scale=per_head_scale, gap=gap, min_pixels=1)
    height, width = thumbs.values.shape[2] * zoom, thumbs.values.shape[3] * zoom
    pitch_x, pitch_y = width + gap, height + gap
    centres_x = [h * pitch_x + (width - 1) / 2 for h in range(heads)]
    centres_y = [i * pitch_y + (height - 1) / 2 for i in range(layers)]
    points_x = [x for _ in range(layers) for x in centres_x]
    points_y = [y for y in centres_y for _ in range(heads)]
    where = [[layer, h] for layer in thumbs.layers for h in range(heads)]
    shapes = []
    if selected is not None and selected[0] in thumbs.layers:
        i, h = thumbs.layers.index(selected[0]), selected[1]
        shapes.append({"type": "rect", "x0": h * pitch_x - 1.5, "x1": h * pitch_x + width + 0.5, "y0": i * pitch_y - 1.5,
                       "y1": i * pitch_y + height + 0.5, "line": {"color": "#d62728", "width": 2}})
    notes = [thumbnails_note(thumbs, dpr), "each head coloured to its own maximum" if per_head_scale else
             "colour 0 → 1 fixed"]
    return go.Figure(
        data=[
            {"type": "image", "source": png_source(png), "x0": 0, "y0": 0, "dx": 1, "dy": 1, "hoverinfo": "skip"},
            {"type": "scatter", "x": points_x, "y": points_y, "mode": "markers", "customdata": where,
             "marker": {"size": max(12, min(width / dpr, 40)), "symbol": "square", "opacity": 0},
             "hovertemplate": HOVER_POINTS, "showlegend": False},
        ],
        layout={
            "template": NO_TEMPLATE,
            "title": {"text": f"{plotly_safe(title)}<br><sub>{'; '.join(notes)}</sub>"},
            "xaxis": {"title": {"text": "head"}, "tickmode": "array", "tickvals": centres_x,
                      "ticktext": [str(h) for h in range(heads)], "showgrid": False, "zeroline": False,
                      "range": [-0.5, heads * pitch_x - 0.5]},
            "yaxis": {"title": {"text": BLOCK_AXIS}, "tickmode": "array", "tickvals": centres_y,
                      "ticktext": [str(layer) for layer in thumbs.layers], "showgrid": False, "zeroline": False,
                      "range": [layers * pitch_y - 0.5, -0.5]},
            "shapes": shapes,
            "showlegend": False,
            **exact_layout(heads * pitch_x, layers * pitch_y, dpr, THUMB_MARGINS),
        },
    )


def thumbnails_table(thumbs: Thumbnails) -> pd.DataFrame:
    """The thumbnails' pixels: one row per (layer, head, sampled query), one column per block of keys."""
    n = thumbs.num_tokens
    ends = np.append(thumbs.col_starts[1:], n) - 1
    layers, heads, r, c = thumbs.values.shape
    table = pd.DataFrame(thumbs.values.reshape(-1, c).astype(np.float64),
                         columns=[f"keys {_span(a, b)}" for a, b in zip(thumbs.col_starts, ends, strict=True)])
    table.insert(0, "query", np.tile(thumbs.rows, layers * heads))
    table.insert(0, "head", np.tile(np.repeat(np.arange(heads), r), layers))
    table.insert(0, "layer", np.repeat(np.asarray(thumbs.layers), heads * r))
    return table
