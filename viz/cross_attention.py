"""Figures for cross-attention: the soft alignment of target words to source words, layer by layer."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from core.attention_heads.cross_attention import Alignment
from core.model.layers import BLOCK_AXIS
from core.model.tokens import unique_labels
from viz.common import COLORBLIND_SAFE, plotly_safe, token_axis

MAX_CELL_TEXT = 60  # above this many target columns the source labels are left to the hover


def alignment_grid(alignment: Alignment, *, title: str) -> go.Figure:
    """Decoder layers (rows, counted from 0, at the bottom) × target units (columns); each cell's text is
    the source unit that target unit attends to most, its colour that weight (0 → 1)."""
    layers, q = alignment.targets.shape
    query_labels = [alignment.labels[i] for i in alignment.queries]
    sources = np.array([[plotly_safe(alignment.key_labels[j]) for j in row] for row in alignment.targets], dtype=object)
    queries = np.array([[plotly_safe(label) for label in query_labels]] * layers, dtype=object)
    fig = go.Figure(
        go.Heatmap(
            z=alignment.weights.astype(float),
            x=list(range(q)),
            y=list(range(layers)),
            text=sources if q <= MAX_CELL_TEXT else None,
            texttemplate="%{text}" if q <= MAX_CELL_TEXT else None,
            textfont={"size": 10},
            customdata=np.stack([queries, sources], axis=-1),
            colorscale=COLORBLIND_SAFE,
            zmin=0.0,
            zmax=max(1.0, float(np.nanmax(alignment.weights, initial=0.0))),
            xgap=1,
            ygap=1,
            colorbar={"title": {"text": "weight"}},
            hovertemplate="layer %{y}: %{customdata[0]} → %{customdata[1]} (%{z:.3f})<extra></extra>",
        )
    )
    fig.update_layout(
        title=plotly_safe(title),
        xaxis=token_axis(query_labels) | {"title": "target token (query)", "tickangle": -45},
        yaxis={"title": "decoder " + BLOCK_AXIS, "dtick": 1},
        height=220 + 34 * layers,
        margin={"l": 60, "r": 20, "t": 50, "b": 90},
    )
    return fig


def alignment_figure(matrix: np.ndarray, labels: list[str], key_labels: list[str], alignment: Alignment, layer: int,
                     *, title: str) -> go.Figure:
    """One decoder layer's cross-attention ``[t, s]`` (heads reduced as for ``alignment``), target rows and source
    columns, with a ring on each target unit's most-attended source unit: the soft alignment matrix."""
    names, key_names = unique_labels(labels), unique_labels(key_labels)
    safe, key_safe = [plotly_safe(n) for n in names], [plotly_safe(n) for n in key_names]
    fig = go.Figure(
        go.Heatmap(
            z=matrix.astype(float),
            x=key_safe,
            y=safe,
            colorscale=COLORBLIND_SAFE,
            zmin=0.0,
            zmax=max(1.0, float(np.nanmax(matrix, initial=0.0))),
            colorbar={"title": {"text": "weight"}},
            hovertemplate="%{y} → %{x}: %{z:.4f}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[key_safe[j] for j in alignment.targets[layer]],
            y=[safe[i] for i in alignment.queries],
            mode="markers",
            marker={"symbol": "circle-open", "size": 14, "color": "#D55E00", "line": {"width": 3}},
            name="most attended",
            hoverinfo="skip",
        )
    )
    side = min(1200, max(380, 24 * len(labels) + 200))
    fig.update_layout(
        title=plotly_safe(title),
        xaxis={"type": "category", "title": "source token (key)", "tickangle": -45, "showgrid": False, "automargin": True},
        yaxis={"type": "category", "title": "target token (query)", "autorange": "reversed", "showgrid": False,
               "automargin": True},
        height=side,
        showlegend=False,
        margin={"l": 80, "r": 20, "t": 60, "b": 80},
    )
    return fig
