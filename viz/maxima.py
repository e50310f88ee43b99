"""Figures for the maxima page: where each token's strongest attention lands, and attention beyond raw weights."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.attention_heads.attention import Maxima
from core.model.layers import BLOCK_AXIS
from viz.common import OKABE_ITO, SEQUENTIAL, plotly_safe, token_axis

DISTANCE_SCALE = "PuOr"  # diverging, colour-blind safe: orange = left, white = the token itself, purple = right
MAX_CELL_TEXT = 60  # above this many query columns the target labels are left to the hover
MAX_LABEL_CHARS = 24  # a longer token label (an [UNK] standing for 400 emoji) is cut on axes and in cells; hovers keep it


def short_label(label: str, limit: int = MAX_LABEL_CHARS) -> str:
    """``label`` cut to ``limit`` characters with an ellipsis: Plotly places an axis title below its tick labels, and
    below one label hundreds of characters long it computed the position −∞ (Chromium: "attribute y: Expected
    length, "-Infinity"")."""
    return label if len(label) <= limit else label[: limit - 1] + "…"


def maxima_grid(maxima: Maxima, *, title: str, weight_name: str = "weight") -> go.Figure:
    """Layers (blocks, rows, from 0 at the bottom) × query tokens (columns), coloured by
    target position − query position; each cell's text is the most-attended token."""
    distances = maxima.distances.astype(float)  # [layers, q]
    layers, q = distances.shape
    query_labels = [maxima.labels[i] for i in maxima.queries]
    target_labels = np.array([[plotly_safe(maxima.labels[t]) for t in row] for row in maxima.targets], dtype=object)
    cell_labels = np.array([[plotly_safe(short_label(maxima.labels[t])) for t in row] for row in maxima.targets], dtype=object)
    queries = np.array([[plotly_safe(label) for label in query_labels]] * layers, dtype=object)
    customdata = np.stack([queries, target_labels, maxima.weights.astype(object)], axis=-1)
    reach = max(1.0, float(np.abs(distances).max(initial=0)))
    fig = go.Figure(
        go.Heatmap(
            z=distances,
            x=list(range(q)),
            y=list(range(layers)),
            text=cell_labels if q <= MAX_CELL_TEXT else None,
            texttemplate="%{text}" if q <= MAX_CELL_TEXT else None,
            textfont={"size": 10},
            customdata=customdata,
            colorscale=DISTANCE_SCALE,
            zmid=0,
            zmin=-reach,
            zmax=reach,
            xgap=1,
            ygap=1,
            colorbar={"title": {"text": "target − query<br>(positions)"}},
            hovertemplate=(
                "layer %{y}: %{customdata[0]} → %{customdata[1]}<br>"
                f"{weight_name} %{{customdata[2]:.3f}} · distance %{{z}}<extra></extra>"
            ),
        )
    )
    fig.update_layout(
        title=title,
        xaxis=token_axis([short_label(label) for label in query_labels]) | {"title": "query token", "tickangle": -45},
        yaxis={"title": BLOCK_AXIS, "dtick": 1},
        height=220 + 34 * layers,
        margin={"l": 60, "r": 20, "t": 50, "b": 90},
    )
    return fig


def attention_panels(panels: list[tuple[str, np.ndarray]], labels: list[str], *, stacked: bool = False) -> go.Figure:
    """Side-by-side heatmaps ``[T, T]`` (query rows, key columns) on one shared colour scale from 0; one under
    another when ``stacked`` (a phone's column has no room for three)."""
    safe = [plotly_safe(label) for label in labels]
    t = len(labels)
    hover = np.array([[[safe[i], safe[j]] for j in range(t)] for i in range(t)], dtype=object)
    rows, cols = (len(panels), 1) if stacked else (1, len(panels))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[title for title, _ in panels], horizontal_spacing=0.03,
                        vertical_spacing=0.5 / len(panels) if stacked else None)
    top = max(float(np.max(matrix)) for _, matrix in panels)
    shown = [short_label(label) for label in labels]
    for index, (_, matrix) in enumerate(panels):
        row, col = (index + 1, 1) if stacked else (1, index + 1)
        fig.add_trace(
            go.Heatmap(
                z=np.asarray(matrix, dtype=np.float32),
                x=list(range(t)),
                y=list(range(t)),
                customdata=hover,
                coloraxis="coloraxis",
                hovertemplate="%{customdata[0]} → %{customdata[1]}: %{z:.3f}<extra></extra>",
            ),
            row=row,
            col=col,
        )
        fig.update_xaxes(token_axis(shown) | {"tickangle": -45, "title": "key"}, row=row, col=col)
        first = col == 1  # the query labels and title once, on the left
        fig.update_yaxes(token_axis(shown) | {"autorange": "reversed", "showticklabels": first, "title": "query" if first else None},
                         row=row, col=col)
    fig.update_layout(
        coloraxis={"colorscale": SEQUENTIAL, "cmin": 0.0, "cmax": top, "colorbar": {"title": {"text": "share of row"}}},
        height=(260 + 14 * min(t, 40)) * (len(panels) if stacked else 1),
        margin={"l": 60, "r": 20, "t": 60, "b": 90},
    )
    return fig


def special_share_chart(layers: list[int], series: dict[str, np.ndarray]) -> go.Figure:
    """One line per attention kind: the share of attention on special tokens at each layer (block, from 0)."""
    fig = go.Figure()
    for colour, (name, values) in zip(OKABE_ITO, series.items()):
        fig.add_trace(
            go.Scatter(
                x=layers,
                y=values,
                name=name,
                mode="lines+markers",
                line={"color": colour},
                hovertemplate=f"{name}<br>layer %{{x}}: %{{y:.1%}}<extra></extra>",
            )
        )
    fig.update_layout(
        title="Share of attention on special tokens ([CLS], [SEP], …)",
        xaxis={"title": BLOCK_AXIS, "dtick": 1},
        yaxis={"title": "share of each row", "tickformat": ".0%", "rangemode": "tozero"},
        height=340,
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
    )
    return fig
