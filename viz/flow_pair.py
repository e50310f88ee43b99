"""An encoder-decoder's information-flow route (``core.causal.flow_pair``) as one Plotly figure, and its names and table.

The encoder's columns (source tokens) on the left, the decoder's (target tokens, shifted right) on the right, both
stacks' layers up on one height, so the figure fills a 16:9 slide; the cross-attention edges run from the top of the
encoder (its last layer) across to the decoder's nodes after cross-attention, dotted and coloured by their top head.
Each decoder layer has four levels: after self-attention, after cross-attention, its MLP (a square) and after the
block. Every edge and node has a clickable point carrying its id, as in ``viz.flow``.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from core.causal.flow import Edge, Node, RouteGraph
from core.causal.flow_pair import ENCODER
from core.maths.numbers import percent
from viz.common import plotly_safe
from viz.flow import FRAME_PX, LAYER_AXIS, LAYER_PX, MIN_HEIGHT, MLP_OFFSET, SELF_BOW, draw_route

GAP = 1.5  # columns between the encoder's last source token and the decoder's first position
ENCODER_LEVELS = {"embedding": 0.0, "attention": 1.0, "mlp": 1.5, "block": 2.0}  # within a layer of height 2
DECODER_LEVELS = {"embedding": 0.0, "attention": 0.6, "cross": 1.2, "mlp": 1.6, "block": 2.0}


def encoder_side(node: Node) -> bool:
    return node[0].startswith(ENCODER)


class PairLayout:
    """Where the nodes of an encoder-decoder's graph go and what they are called."""

    def __init__(self, source_labels: list[str], target_labels: list[str], encoder_layers: int, decoder_layers: int):
        self.source, self.target = source_labels, target_labels
        self.encoder_layers, self.decoder_layers = encoder_layers, decoder_layers
        self.top = 2.0 * max(encoder_layers, decoder_layers)

    def x(self, node: Node) -> float:
        kind, _, p = node
        base = p if encoder_side(node) else len(self.source) + GAP + p
        return base + (MLP_OFFSET if kind.removeprefix(ENCODER) == "mlp" else 0.0)

    def y(self, node: Node) -> float:
        kind, layer, _ = node
        if encoder_side(node):
            unit = self.top / (2 * self.encoder_layers)
            level = ENCODER_LEVELS[kind.removeprefix(ENCODER)]
        else:
            unit, level = self.top / (2 * self.decoder_layers), DECODER_LEVELS[kind]
        return 0.0 if level == 0 else (2 * layer + level) * unit

    def place(self, node: Node) -> tuple[float, float]:
        return self.x(node), self.y(node)

    def name(self, node: Node) -> str:
        """Plain text: ``“chat” (source token 2), encoder layer 1 after attention`` and the like."""
        kind, layer, p = node
        if encoder_side(node):
            where, stack, kind = f"“{self.source[p]}” (source token {p})", "encoder", kind.removeprefix(ENCODER)
        else:
            where, stack = f"“{self.target[p]}” (decoder position {p})", "decoder"
        what = {"embedding": f"{stack} embedding (hidden state 0)",
                "attention": f"{stack} layer {layer} after {'self-' if stack == 'decoder' else ''}attention",
                "cross": f"decoder layer {layer} after cross-attention", "mlp": f"{stack} layer {layer} MLP",
                "block": f"{stack} hidden state {layer + 1} (after layer {layer})"}[kind]
        return f"{where}, {what}"

    def edge_name(self, edge: Edge) -> str:
        what = {"attention": f"attention (top head {edge.top_head})", "residual": "residual", "mlp": "MLP",
                "cross": f"cross-attention (top head {edge.top_head})"}[edge.kind]
        return f"{what}: {self.name(edge.source)} → {self.name(edge.target)}, {percent(edge.weight, 1)}"

    def points(self, edge: Edge) -> tuple[list[float], list[float], tuple[float, float]]:
        """As ``viz.flow.edge_points``: an edge's polyline and its clickable point, no two edges' points alike."""
        (x0, y0), (x1, y1) = self.place(edge.source), self.place(edge.target)
        if edge.kind == "attention" and edge.source[2] == edge.target[2]:
            bend = ((x0 + x1) / 2 - SELF_BOW, (y0 + y1) / 2)
            return [x0, bend[0], x1], [y0, bend[1], y1], bend
        if edge.kind in ("attention", "cross"):
            count = len(self.source) if encoder_side(edge.source) else len(self.target)
            along = 0.25 + 0.5 * edge.source[2] / max(1, count - 1)
        else:
            along = 0.5
        return [x0, x1], [y0, y1], (x0 + along * (x1 - x0), y0 + along * (y1 - y0))

    def token(self, node: Node) -> str:
        return (self.source if encoder_side(node) else self.target)[node[2]]


def pair_route_figure(graph: RouteGraph, layout: PairLayout, *, title: str, picked: str | None = None) -> go.Figure:
    """The route of an encoder-decoder (see the module docstring); ``picked``: the id of the ringed edge or node."""
    fig = draw_route(graph, points=layout.points, place=layout.place, name=layout.name, picked=picked)
    s, t = len(layout.source), len(layout.target)
    ticks = list(range(s)) + [s + GAP + i for i in range(t)]
    labels = [plotly_safe(x) for x in (*layout.source, *layout.target)]
    step = max(1, -(-layout.encoder_layers // 12))
    unit = layout.top / (2 * layout.encoder_layers)
    annotations = [{"x": (s - 1) / 2, "y": layout.top + 0.5, "text": "encoder (source)", "showarrow": False},
                   {"x": s + GAP + (t - 1) / 2, "y": layout.top + 0.5, "text": "decoder (target, shifted right)",
                    "showarrow": False}]
    if layout.decoder_layers != layout.encoder_layers:  # the y ticks name the encoder's layers: the decoder's beside it
        decoder_unit = layout.top / (2 * layout.decoder_layers)
        annotations += [{"x": s + GAP + t - 0.3, "y": (2 * layer + 1) * decoder_unit, "text": f"dec. {layer}",
                         "showarrow": False, "xanchor": "left"} for layer in range(layout.decoder_layers)]
    fig.update_layout(
        title={"text": plotly_safe(title)},
        xaxis={"tickmode": "array", "tickvals": ticks, "ticktext": labels, "range": [-0.6, s + GAP + t - 0.1],
               "showgrid": False, "zeroline": False, "title": {"text": "source token · target token"}},
        yaxis={"title": {"text": LAYER_AXIS}, "tickmode": "array", "zeroline": False, "showgrid": False,
               "tickvals": [0.0] + [(2 * layer + 1.5) * unit for layer in range(0, layout.encoder_layers, step)],
               "ticktext": ["embedding"] + [str(layer) for layer in range(0, layout.encoder_layers, step)],
               "range": [-0.6, layout.top + 1.0]},
        annotations=annotations,
        height=max(MIN_HEIGHT, FRAME_PX + LAYER_PX * max(layout.encoder_layers, layout.decoder_layers)),
        hovermode="closest",
    )
    return fig


def pair_edge_table(graph: RouteGraph, layout: PairLayout) -> pd.DataFrame:
    """One row per edge: kind, both ends (stack, kind, layer, position, token), weight and the top head's share."""
    rows = []
    for edge in graph.edges:
        row = {"kind": edge.kind, "weight": edge.weight}
        for end, node in (("source", edge.source), ("target", edge.target)):
            row |= {f"{end}_stack": "encoder" if encoder_side(node) else "decoder",
                    f"{end}_kind": node[0].removeprefix(ENCODER), f"{end}_layer": node[1],
                    f"{end}_position": node[2], f"{end}_token": layout.token(node)}
        row |= {"top_head": edge.top_head, "top_head_share": max(edge.heads) if edge.heads else None}
        rows.append(row)
    columns = ["kind", "weight"] + [f"{end}_{what}" for end in ("source", "target")
                                    for what in ("stack", "kind", "layer", "position", "token")]
    return pd.DataFrame(rows, columns=[*columns, "top_head", "top_head_share"])
