"""Figures for comparing one word in two texts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from core.model.layers import HIDDEN_STATE_AXIS
from viz.common import OKABE_ITO, plotly_safe
from viz.inside import matrix_heatmap


def attention_heatmap(matrix: np.ndarray, labels: list[str], *, title: str) -> go.Figure:
    """One head's attention ``[T, T]`` (rows = queries, columns = keys) on a fixed 0–1 scale,
    so two texts drawn side by side share one colour scale."""
    return matrix_heatmap(matrix, labels, column_labels=labels, title=title, colorbar="attention", zmin=0.0, zmax=1.0)


def similarity_by_layer_chart(frame: pd.DataFrame, word: str, lookup: float, control: pd.DataFrame | None = None) -> go.Figure:
    """Line chart of ``frame`` (columns ``layer``, ``cosine_similarity``) with the raw lookup's
    cosine ``lookup`` as a dashed reference line, and optionally ``control`` (same columns: text A
    against a same-sense control text) as a second line."""
    safe_word = plotly_safe(word)
    fig = go.Figure(
        go.Scatter(
            x=frame["layer"],
            y=frame["cosine_similarity"],
            mode="lines+markers",
            line={"color": OKABE_ITO[0], "width": 3},
            name="text A vs text B",
            hovertemplate="A vs B, hidden state %{x}: cosine %{y:.4f}<extra></extra>",
        )
    )
    if control is not None:
        fig.add_trace(
            go.Scatter(
                x=control["layer"],
                y=control["cosine_similarity"],
                mode="lines+markers",
                line={"color": OKABE_ITO[2], "width": 2, "dash": "dot"},
                name="text A vs control (same sense)",
                hovertemplate="A vs control, hidden state %{x}: cosine %{y:.4f}<extra></extra>",
            )
        )
    fig.add_hline(
        y=lookup,
        line={"color": OKABE_ITO[5], "dash": "dash"},
        annotation_text=f"word-embedding lookup: {lookup:.4f}",
        annotation_position="top right",
    )
    low = float(min(frame["cosine_similarity"].min(), lookup, *([] if control is None else [control["cosine_similarity"].min()])))
    bottom = min(0.0, low - 0.05)
    # room above the reference line for its label (a 16-px line on the 140-px plot a phone leaves), inside the plot
    top = max(1.05, lookup + 0.15 * (1.05 - bottom))
    fig.update_layout(
        title=f"“{safe_word}” in text A vs text B: cosine similarity at every layer",
        xaxis={"title": HIDDEN_STATE_AXIS, "dtick": 1},
        yaxis={"title": "cosine similarity", "range": [bottom, top]},
        height=380,
        showlegend=control is not None,
        legend={"orientation": "h", "y": -0.3},
        margin={"l": 60, "r": 20, "t": 50, "b": 60},
    )
    return fig
