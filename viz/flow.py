"""The information-flow route graph (``core.causal.flow.route_graph``) as a Plotly figure, and its names and table.

Positions run across (one column per token), layers up: the embedding at the bottom, then per layer the residual
after attention and the residual after the block; each MLP is a small square beside its position. Edges are lines
whose width grows with their weight; attention edges are coloured by the head that carries most of them. Every edge
and node has a point of its own that carries its id as ``customdata``, so a click on the figure can pick it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd
import plotly.colors
import plotly.graph_objects as go

from core.causal.flow import Edge, Node, RouteGraph
from core.maths.numbers import percent
from viz.common import plotly_safe, token_axis
from viz.fit.text import TICK_PITCH
from viz.fit.width import MIN_CELL_TEXT_PX, PAGE_FONT_PX, plot_area

RESIDUAL_COLOUR = "#999999"
MLP_COLOUR = "#000000"
PICKED_COLOUR = "#D55E00"  # Okabe-Ito vermilion: the ring around the edge or node whose detail is open
HEAD_COLOURS = plotly.colors.qualitative.Safe  # colour-blind safe, 11 colours, cycled past that
CROSS_DASH = "dot"  # cross-attention edges (an encoder-decoder's), apart from the stacks' own attention edges
MLP_OFFSET = 0.3  # an MLP square sits this far right of its position's column
SELF_BOW = 0.2  # an attention edge within one position bends this far left of its residual edge
# The y title: short, since a long one (core.model.layers.BLOCK_AXIS) met the wrapped figure title on a phone; the nodes'
# hover names say which hidden state each is ("hidden state 3 (after layer 2)").
LAYER_AXIS = "layer (counted from 0)"
MIN_WIDTH, MAX_WIDTH, WIDTH_STEP = 1.0, 8.0, 0.5  # line widths (px) for weights 0 and 1, rounded to the step
# Pixels per layer (two node rows: after attention, after the block): SmolLM2's 30 layers in 450 px put layers 0-1 in
# a 20-px band over the embedding row (issue 50, item 11); at 40 px a row is 20 px from the next, apart to the eye and
# to a click. Plus the title, axes and legend around the plot.
LAYER_PX, FRAME_PX, MIN_HEIGHT = 40, 180, 450
# A column narrower than this (a phone: 358 px at 390 × 844) gets the compact frame (``route_frame``): every token's
# label needs about 18 px across (1.5 tick-font sizes, ``viz.fit.text.TICK_PITCH``), and the long y title, the word
# "embedding" and Plotly's default 80-px right margin left a 15-token text 167 px, so every other label was dropped.
# The phone's frame writes "layer" above the layer numbers, not as a turned title beside them (that took 50 px of the
# width), and draws the token labels smaller, in half pixels down to LEAST_LABEL_PX (the least size the fitting lets
# text be drawn at: viz.fit.width.MIN_CELL_TEXT_PX), before any is dropped: 20 tokens' labels at 9.5 px on a phone
# (fitted for its column measured in 20-px steps, 340 px; the labels 14.8 px apart as drawn, 11 px tall).
NARROW_PX = 600
NARROW_AXIS, NARROW_EMBEDDING, NARROW_MARGIN_PX = "layer", "emb.", 10
NARROW_LEFT_PX = 34  # the left margin holds "layer" (about 28 px at 12 px) above the layer numbers
LEAST_LABEL_PX = MIN_CELL_TEXT_PX
# On a phone the legend's title stands on a row of its own: beside the first row (Plotly's place for a horizontal legend) it kept
# the left half of a phone's figure from every row, so 12 heads took 2 entries a row (7 rows, 190 px).
LEGEND_TITLE = "edges (attention: by top head)"


def node_y(node: Node) -> float:
    """Height of a node: the embedding at 0, layer l's residual after attention at 2l + 1, its MLP at 2l + 1.5 and
    the residual after the block at 2l + 2."""
    kind, layer, _ = node
    return {"embedding": 0.0, "attention": 2 * layer + 1.0, "mlp": 2 * layer + 1.5, "block": 2 * layer + 2.0}[kind]


def node_x(node: Node) -> float:
    return node[2] + (MLP_OFFSET if node[0] == "mlp" else 0.0)


def edge_width(weight: float) -> float:
    """Line width for an edge's weight (a share in [0, 1]), rounded so that edges of one colour share few traces."""
    raw = MIN_WIDTH + (MAX_WIDTH - MIN_WIDTH) * min(max(weight, 0.0), 1.0)
    return round(raw / WIDTH_STEP) * WIDTH_STEP


def node_name(node: Node, labels: list[str]) -> str:
    """Plain text: ``“Paris” (token 5), hidden state 3 (after layer 2)`` and the like."""
    kind, layer, p = node
    where = f"“{labels[p]}” (token {p})"
    if kind == "embedding":
        return f"{where}, embedding (hidden state 0)"
    if kind == "attention":
        return f"{where}, layer {layer} after attention"
    if kind == "mlp":
        return f"{where}, layer {layer} MLP"
    return f"{where}, hidden state {layer + 1} (after layer {layer})"


def edge_name(edge: Edge, labels: list[str]) -> str:
    """Plain text naming an edge by its kind, ends and weight."""
    what = {"attention": f"attention (top head {edge.top_head})", "cross": f"cross-attention (top head {edge.top_head})",
            "residual": "residual", "mlp": "MLP"}[edge.kind]
    return f"{what}: {node_name(edge.source, labels)} → {node_name(edge.target, labels)}, {percent(edge.weight, 1)}"


def node_id(node: Node) -> str:
    """A short stable id for links: ``block:3:5``."""
    return f"{node[0]}:{node[1]}:{node[2]}"


def edge_id(edge: Edge) -> str:
    """A short stable id for links: ``attention|block:2:3>attention:3:5``."""
    return f"{edge.kind}|{node_id(edge.source)}>{node_id(edge.target)}"


def edge_points(edge: Edge, tokens: int) -> tuple[list[float], list[float], tuple[float, float]]:
    """``(xs, ys, (x, y))``: the polyline of an edge and the point its clickable marker sits on, one point per edge.
    An attention edge between positions has its point a fraction 0.25 + 0.5 · key / (tokens − 1) of the way along, so
    two edges of one layer never share it (edges from one key differ in x, from two keys in y), nor with the residual
    edges (at 0.5, straight up). An attention edge within one position would lie on the residual edge there, so it
    bows ``SELF_BOW`` to the left, its point at the bend; the other edges have theirs in the middle."""
    (x0, y0), (x1, y1) = (node_x(edge.source), node_y(edge.source)), (node_x(edge.target), node_y(edge.target))
    if edge.kind == "attention" and edge.source[2] == edge.target[2]:
        bend = ((x0 + x1) / 2 - SELF_BOW, (y0 + y1) / 2)
        return [x0, bend[0], x1], [y0, bend[1], y1], bend
    along = 0.25 + 0.5 * edge.source[2] / max(1, tokens - 1) if edge.kind == "attention" else 0.5
    return [x0, x1], [y0, y1], (x0 + along * (x1 - x0), y0 + along * (y1 - y0))


def _group(edge: Edge) -> tuple[str, str]:
    """(legend name, colour) of an edge; a cross-attention edge is named apart (and drawn dotted: ``CROSS_DASH``)."""
    if edge.kind in ("attention", "cross"):  # short names: a phone's legend of every head fits a few rows
        head = edge.top_head
        return f"{'cross, ' if edge.kind == 'cross' else ''}head {head}", HEAD_COLOURS[head % len(HEAD_COLOURS)]
    if edge.kind == "mlp":
        return "MLP", MLP_COLOUR
    return "residual", RESIDUAL_COLOUR


def _edge_hover(edge: Edge, name: Callable[[Node], str]) -> str:
    kind = "cross-attention" if edge.kind == "cross" else edge.kind
    lines = [f"<b>{plotly_safe(kind)} edge</b>", f"from {plotly_safe(name(edge.source))}",
             f"to {plotly_safe(name(edge.target))}", f"share of the target's inputs: {percent(edge.weight, 1)}"]
    if edge.heads:
        order = sorted(range(len(edge.heads)), key=lambda h: -edge.heads[h])[:3]
        lines.append("heads: " + ", ".join(f"{h} ({percent(edge.heads[h], 1)})" for h in order))
    return "<br>".join(lines)


def route_figure(graph: RouteGraph, labels: list[str], num_layers: int, *, title: str,
                 picked: str | None = None, width_px: float | None = None) -> go.Figure:
    """The route graph: one line trace per (colour, width) with None-separated polylines, one per edge; an invisible
    marker on each edge (``edge_points``) carries its hover text and its ``edge_id`` as ``customdata``, so a click
    picks it; nodes as circles (MLPs as squares), each with its ``node_id``. ``picked``: the id of the edge or node
    whose detail is open, marked with a ring. A click leaves every point as it was drawn (no dimming). ``width_px``:
    the column it is drawn in, when known; under ``NARROW_PX`` the frame is compact (``route_frame``)."""
    fig = draw_route(graph, points=lambda e: edge_points(e, len(labels)), place=lambda n: (node_x(n), node_y(n)),
                     name=lambda n: node_name(n, labels), picked=picked)
    narrow = width_px is not None and width_px < NARROW_PX
    fig.update_layout(title={"text": plotly_safe(title)}, hovermode="closest",
                      **route_frame(labels, num_layers, narrow=narrow))
    if narrow:
        # the token labels as large as every one of them fits turned upright (at most the page's 12 px, at least 9)
        low, high = fig.layout.xaxis.range
        pitch = plot_area(fig, width_px, PAGE_FONT_PX, page=True)[0] / (high - low)
        size = min(PAGE_FONT_PX, max(LEAST_LABEL_PX, math.floor(2 * pitch / TICK_PITCH) / 2))
        if size < PAGE_FONT_PX:
            fig.update_xaxes(tickfont={"size": size})
    return fig


def route_frame(labels: list[str], num_layers: int, *, narrow: bool = False) -> dict:
    """The route figure's axes, legend, margins and height. ``narrow`` (a phone): "layer" written above the y axis's
    numbers (no turned title beside them), the embedding row as "emb." (its hover names it), a small right margin and
    the x range just past the last MLP square, so that up to 20 tokens' labels all fit across, turned upright."""
    step = max(1, -(-num_layers // 16))  # at most about 16 layer labels
    # the range reaches past the last MLP square (it sat half outside the plot on a phone: issue 50, item 16)
    left, right = (-0.4, len(labels) - 0.6 + MLP_OFFSET) if narrow else (-0.5, len(labels) - 0.2 + MLP_OFFSET)
    frame = {
        "xaxis": {**token_axis(labels), "title": {"text": "token"}, "range": [left, right]},
        # a horizontal legend under the plot, also when it has a single entry (a vertical one stood right of the plot
        # and left a phone's plot 64 px); on a phone its title above its rows (Plotly sets it left of the first row,
        # which kept the rows to the right half of the figure)
        "legend": {"title": {"text": LEGEND_TITLE, "side": "top" if narrow else None}, "orientation": "h", "x": 0,
                   "xanchor": "left", "xref": "container", "y": 0, "yanchor": "bottom", "yref": "container"},
        "yaxis": {"title": {"text": None if narrow else LAYER_AXIS}, "tickmode": "array", "zeroline": False,
                  "showgrid": False, "tickvals": [0.0] + [2 * layer + 1.5 for layer in range(0, num_layers, step)],
                  "ticktext": [NARROW_EMBEDDING if narrow else "embedding"]
                  + [str(layer) for layer in range(0, num_layers, step)],
                  "range": [-0.6, 2 * num_layers + 0.6]},
        "height": max(MIN_HEIGHT, FRAME_PX + LAYER_PX * num_layers),
    }
    if narrow:
        # the left margin just wider than "layer" (pushed out by the labels): the tick thinning
        # (viz.fit.width.plot_area) otherwise assumes Plotly's 80 px
        frame["margin"] = {"l": NARROW_LEFT_PX, "r": NARROW_MARGIN_PX}
        # the y axis's name above its numbers, right-aligned with them, where a turned title took 50 px of the width
        frame["annotations"] = [{"text": NARROW_AXIS, "showarrow": False, "xref": "paper", "x": 0, "xanchor": "right",
                                 "yref": "paper", "y": 1, "yanchor": "bottom"}]
    return frame


def draw_route(graph: RouteGraph, *, points: Callable[[Edge], tuple[list, list, tuple[float, float]]],
               place: Callable[[Node], tuple[float, float]], name: Callable[[Node], str],
               picked: str | None = None) -> go.Figure:
    """The traces of ``route_figure`` (no axes): ``points(edge)`` as ``edge_points``, ``place(node)`` ``(x, y)``,
    ``name(node)`` plain text. Cross-attention edges are dotted."""
    segments: dict[tuple[str, str, float, str], tuple[list, list]] = {}
    middles_x, middles_y, middles_text, middles_id = [], [], [], []
    for edge in sorted(graph.edges, key=lambda e: e.weight):  # heavy edges drawn last, on top
        legend, colour = _group(edge)
        dash = CROSS_DASH if edge.kind == "cross" else "solid"
        xs, ys = segments.setdefault((legend, colour, edge_width(edge.weight), dash), ([], []))
        line_x, line_y, (x, y) = points(edge)
        xs += [*line_x, None]
        ys += [*line_y, None]
        middles_x.append(x)
        middles_y.append(y)
        middles_text.append(_edge_hover(edge, name))
        middles_id.append(edge_id(edge))
    fig = go.Figure()
    shown: set[str] = set()
    legend_order = {"residual": 0, "MLP": 1}
    for (legend, colour, width, dash), (xs, ys) in sorted(
            segments.items(), key=lambda item: (legend_order.get(item[0][0], 2), item[0][0], item[0][2])):
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": colour, "width": width, "dash": dash},
                                 name=legend, legendgroup=legend, showlegend=legend not in shown, hoverinfo="skip",
                                 meta="edges"))
        shown.add(legend)
    invisible = {"marker": {"opacity": 0}}
    fig.add_trace(go.Scatter(x=middles_x, y=middles_y, mode="markers", marker={"size": 10, "opacity": 0},
                             hovertext=middles_text, hoverinfo="text", customdata=middles_id, showlegend=False,
                             name="edges", selected=invisible, unselected=invisible))
    nodes = graph.nodes
    drawn = {"marker": {"opacity": 1}}
    for square in (False, True):
        kind = [n for n in nodes if (n[0] == "mlp") == square]
        if not kind:
            continue
        fig.add_trace(go.Scatter(
            x=[place(n)[0] for n in kind], y=[place(n)[1] for n in kind], mode="markers",
            marker={"symbol": "square" if square else "circle", "size": 8 if square else 9, "color": "white",
                    "line": {"color": "#444444", "width": 1.5}},
            hovertext=[plotly_safe(name(n)) for n in kind], hoverinfo="text",
            customdata=[node_id(n) for n in kind], selected=drawn, unselected=drawn,
            name="MLP" if square else "representation", showlegend=False))
    ring = next((points(e)[2] for e in graph.edges if edge_id(e) == picked), None) \
        or next((place(n) for n in graph.nodes if node_id(n) == picked), None)
    if ring is not None:  # the ring of the picked edge or node, on its clickable point
        fig.add_trace(go.Scatter(x=[ring[0]], y=[ring[1]], mode="markers", hoverinfo="skip", showlegend=False,
                                 name="picked", marker={"symbol": "circle-open", "size": 18, "color": PICKED_COLOUR,
                                                        "line": {"width": 3}}))
    return fig


def edge_table(graph: RouteGraph, labels: list[str]) -> pd.DataFrame:
    """One row per edge: kind, both ends (kind, layer, position, token), weight and the top head's share."""
    rows = []
    for edge in graph.edges:
        row = {"kind": edge.kind, "weight": edge.weight}
        for end, node in (("source", edge.source), ("target", edge.target)):
            row |= {f"{end}_kind": node[0], f"{end}_layer": node[1], f"{end}_position": node[2],
                    f"{end}_token": labels[node[2]]}
        row |= {"top_head": edge.top_head, "top_head_share": max(edge.heads) if edge.heads else None}
        rows.append(row)
    columns = ["kind", "weight", "source_kind", "source_layer", "source_position", "source_token", "target_kind",
               "target_layer", "target_position", "target_token", "top_head", "top_head_share"]
    return pd.DataFrame(rows, columns=columns)
