"""Figures about single tokens across layers (home page)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from core.model.layers import HIDDEN_STATE_AXIS
from viz.common import SEQUENTIAL, plotly_safe, token_axis


def token_layer_heatmap(values: np.ndarray, labels: list[str], *, title: str, colorbar: str) -> go.Figure:
    """Heatmap of ``values`` ``[layers + 1, T]``: hidden states as rows (0 = embedding layer at the bottom), tokens as columns."""
    layers, t = values.shape
    if t != len(labels):
        raise ValueError(f"{t} columns of values for {len(labels)} labels")
    hover = np.array([[plotly_safe(label) for label in labels]] * layers)
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=list(range(t)),
            y=list(range(layers)),
            customdata=hover,
            colorscale=SEQUENTIAL,
            zmin=float(min(0.0, np.nanmin(values))),
            zmax=1.0,
            colorbar={"title": {"text": colorbar}},
            hovertemplate="token %{customdata} · hidden state %{y}<br>" + colorbar + ": %{z:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        xaxis=token_axis(labels) | {"title": "token", "tickangle": -45},
        yaxis={"title": HIDDEN_STATE_AXIS, "dtick": 1},
        height=260 + 18 * layers,
        margin={"l": 60, "r": 20, "t": 50, "b": 90},
    )
    return fig
