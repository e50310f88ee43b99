"""Small figures for following one attention head step by step: vectors, per-token bars, matrices."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.common import OKABE_ITO, SEQUENTIAL, plotly_safe, token_axis

MASKED_COLOUR = "#BBBBBB"
DIVERGING = "RdBu_r"  # red positive, blue negative; readable with red-green colour blindness
def component_bars(vector: np.ndarray, *, title: str, y_title: str) -> go.Figure:
    """Bar chart of a ``[d]`` vector, one bar per component (0 .. d-1)."""
    fig = go.Figure(
        go.Bar(
            x=list(range(len(vector))),
            y=vector,
            marker_color=OKABE_ITO[0],
            hovertemplate="component %{x}: %{y:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=plotly_safe(title),
        xaxis={"title": "component", "dtick": max(1, len(vector) // 16)},
        yaxis={"title": y_title},
        height=260,
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
    )
    return fig


def rotation_bars(before: np.ndarray, after: np.ndarray, *, title: str) -> go.Figure:
    """Grouped bars of one ``[d]`` vector before and after its rotary embedding, component by component.

    Rotary embedding turns pairs of components by an angle that grows with the position, so the bars move
    while the vector's length stays the same (components past the rotated part do not move).
    """
    fig = go.Figure()
    for i, (name, vector) in enumerate((("before rotation", before), ("after rotation", after))):
        fig.add_trace(go.Bar(x=list(range(len(vector))), y=vector, name=name, marker_color=OKABE_ITO[i],
                             hovertemplate=f"{name}, component %{{x}}: %{{y:.4f}}<extra></extra>"))
    fig.update_layout(
        title=plotly_safe(title), barmode="group", height=280, legend={"orientation": "h", "y": -0.3},
        xaxis={"title": "component", "dtick": max(1, len(before) // 16)}, yaxis={"title": "value"},
        margin={"l": 60, "r": 20, "t": 50, "b": 70},
    )
    return fig


def token_bars(
    values: np.ndarray, labels: list[str], *, title: str, y_title: str, keep: np.ndarray | None = None
) -> go.Figure:
    """Bar chart of one value per token ``[T]``, tokens in text order.

    ``keep``: bool ``[T]``; tokens with False are drawn as grey "masked" markers at 0 instead of bars
    (their value, -inf or 0, is not drawn).
    """
    t = len(values)
    if t != len(labels):
        raise ValueError(f"{t} values for {len(labels)} labels")
    keep = np.ones(t, dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    safe = [plotly_safe(label) for label in labels]
    shown = np.where(keep, values, 0.0)
    fig = go.Figure(
        go.Bar(
            x=list(range(t)),
            y=shown,
            customdata=safe,
            name=y_title,  # a legend (drawn beside the masked marks) names the bars, never "trace 0"
            marker_color=[OKABE_ITO[0] if k else MASKED_COLOUR for k in keep],
            hovertemplate="%{customdata}: %{y:.4f}<extra></extra>",
        )
    )
    if not keep.all():
        masked = np.flatnonzero(~keep)
        fig.add_trace(
            go.Scatter(
                x=masked.tolist(),
                y=[0.0] * len(masked),
                mode="markers",
                marker={"symbol": "x", "color": "#555555", "size": 9},
                customdata=[safe[i] for i in masked],
                name="masked (−∞)",
                hovertemplate="%{customdata}: masked (−∞ before the softmax)<extra></extra>",
            )
        )
    fig.update_layout(
        title=plotly_safe(title),
        xaxis=token_axis(labels) | {"title": "key token", "tickangle": -45},
        yaxis={"title": y_title},
        height=300,
        showlegend=not keep.all(),
        margin={"l": 60, "r": 20, "t": 50, "b": 90},
    )
    return fig


def stacked_token_bars(rows: list[tuple[str, np.ndarray, np.ndarray | None]], labels: list[str], *, title: str) -> go.Figure:
    """``token_bars`` of several quantities over the same tokens, one above the other on a shared token axis.

    ``rows``: ``(name, values [T], keep [T] or None)`` per quantity, drawn top to bottom.
    """
    fig = make_subplots(rows=len(rows), cols=1, shared_xaxes=True, vertical_spacing=0.06)
    for r, (name, values, keep) in enumerate(rows, start=1):
        for trace in token_bars(values, labels, title="", y_title=name, keep=keep).data:
            trace.showlegend = trace.type == "scatter" and r == len(rows)
            fig.add_trace(trace, row=r, col=1)
        fig.update_yaxes(title_text=plotly_safe(name), row=r, col=1)
    fig.update_xaxes(token_axis(labels) | {"tickangle": -45}, row=len(rows), col=1)
    fig.update_xaxes(title_text="key token", row=len(rows), col=1)
    fig.update_layout(
        title=plotly_safe(title),
        height=120 + 170 * len(rows),
        margin={"l": 60, "r": 20, "t": 50, "b": 90},
        legend={"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right", "yanchor": "bottom"},
    )
    return fig


def matrix_heatmap(
    matrix: np.ndarray,
    row_labels: list[str],
    *,
    title: str,
    colorbar: str,
    column_labels: list[str] | None = None,
    row_title: str = "query token",
    column_title: str = "key token",
    zmin: float | None = None,
    zmax: float | None = None,
    symmetric: bool = False,
) -> go.Figure:
    """Heatmap of ``matrix`` ``[rows, columns]``, first row at the top.

    Rows are tokens (``row_labels``); columns are tokens (``column_labels``) or, when
    ``column_labels`` is None, vector components 0 .. n-1. NaN cells (masked) are left blank.
    ``symmetric``: signed values on a diverging scale centred on 0 (else a sequential scale).
    """
    rows, columns = matrix.shape
    if rows != len(row_labels) or (column_labels is not None and columns != len(column_labels)):
        raise ValueError(f"matrix {matrix.shape} does not match the labels")
    safe_rows = [plotly_safe(label) for label in row_labels]
    safe_columns = [plotly_safe(label) for label in column_labels] if column_labels else [str(c) for c in range(columns)]
    hover = np.array([[f"{r} → {c}" for c in safe_columns] for r in safe_rows], dtype=object)
    fig = go.Figure(
        go.Heatmap(
            z=matrix,
            x=list(range(columns)),
            y=list(range(rows)),
            customdata=hover,
            colorscale=DIVERGING if symmetric else SEQUENTIAL,
            zmid=0.0 if symmetric else None,
            zmin=zmin,
            zmax=zmax,
            colorbar={"title": {"text": colorbar}},
            hoverongaps=False,
            hovertemplate="%{customdata}: %{z:.4f}<extra></extra>",
        )
    )
    x_axis = token_axis(column_labels) | {"tickangle": -45} if column_labels else {"dtick": max(1, columns // 16)}
    fig.update_layout(
        title=plotly_safe(title),
        xaxis=x_axis | {"title": column_title if column_labels else "component"},
        yaxis=token_axis(row_labels) | {"title": row_title, "range": [rows - 0.5, -0.5]},  # first row on top
        height=min(760, 200 + 22 * rows),
        margin={"l": 90, "r": 20, "t": 50, "b": 90},
    )
    return fig
