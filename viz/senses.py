"""Figures of one word across many sentences: the 2-D projection per layer and the separation by layer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from core.model.layers import HIDDEN_STATE_AXIS
from viz.common import OKABE_ITO, plotly_safe

UNLABELLED = "unlabelled"
UNLABELLED_COLOUR = "#999999"
HOVER_CONTEXT_CHARS = 70


def highlighted_sentence(sentence: str, span: tuple[int, int], context: int = HOVER_CONTEXT_CHARS) -> str:
    """The sentence escaped for Plotly with the word at ``span`` in bold; at most ``context`` characters each side."""
    start, end = span
    before, after = sentence[max(0, start - context) : start], sentence[end : end + context]
    before = ("…" if start > context else "") + before
    after = after + ("…" if end + context < len(sentence) else "")
    return f"{plotly_safe(before)}<b>{plotly_safe(sentence[start:end])}</b>{plotly_safe(after)}"


def sense_projection_figure(coords: np.ndarray, labels: list[str], hovers: list[str], *, title: str, axis: str) -> go.Figure:
    """Scatter of ``coords`` ``[N, 2]``, one colour per label ("" = unlabelled, grey); ``hovers`` are escaped HTML."""
    if coords.shape != (len(labels), 2) or len(hovers) != len(labels):
        raise ValueError(f"{coords.shape} coordinates for {len(labels)} labels and {len(hovers)} hovers")
    fig = go.Figure()
    names = sorted({label for label in labels if label}) + ([""] if "" in labels else [])
    for k, name in enumerate(names):
        rows = [i for i, label in enumerate(labels) if label == name]
        shown = plotly_safe(name) if name else UNLABELLED
        fig.add_trace(
            go.Scatter(
                x=coords[rows, 0],
                y=coords[rows, 1],
                mode="markers",
                name=shown,
                marker={"size": 9, "opacity": 0.85, "color": OKABE_ITO[k % len(OKABE_ITO)] if name else UNLABELLED_COLOUR},
                customdata=[[shown, hovers[i]] for i in rows],
                hovertemplate="%{customdata[0]}<br>%{customdata[1]}<extra></extra>",
            )
        )
    fig.update_layout(
        title=title,
        xaxis={"title": f"{axis} 1", "showticklabels": False, "zeroline": False},
        yaxis={"title": f"{axis} 2", "showticklabels": False, "zeroline": False},
        legend={"title": {"text": "sense"}},
        height=520,
        margin={"l": 40, "r": 20, "t": 60, "b": 40},
    )
    return fig


def separation_figure(
    table: pd.DataFrame,
    current_layer: int | None = None,
    *,
    chance: float | None = None,
    interval: pd.DataFrame | None = None,
) -> go.Figure:
    """Lines of ``knn_accuracy`` and ``silhouette`` over ``layer`` (0 = embedding layer); a dotted line marks ``current_layer``.

    ``chance``: the 1-NN accuracy expected by chance, drawn as a dashed line; silhouette's "no
    structure" level 0 is always drawn. ``interval``: optional ``separation_interval`` table, drawn
    as a shaded band around each line.
    """
    fig = go.Figure()
    bands = (("knn_low", "knn_high"), ("silhouette_low", "silhouette_high"))
    fills = ("rgba(0, 114, 178, 0.15)", "rgba(230, 159, 0, 0.18)")
    for (column, name, colour), (low, high), fill in zip(
        (("knn_accuracy", "1-NN accuracy (leave one out)", OKABE_ITO[0]), ("silhouette", "silhouette", OKABE_ITO[1])),
        bands,
        fills,
        strict=True,
    ):
        if interval is not None and interval[[low, high]].notna().all().all():
            fig.add_trace(
                go.Scatter(
                    x=list(interval["layer"]) + list(interval["layer"])[::-1],
                    y=list(interval[high]) + list(interval[low])[::-1],
                    fill="toself",
                    fillcolor=fill,
                    line={"width": 0},
                    hoverinfo="skip",
                    name=f"{name}: 90% bootstrap interval",
                    showlegend=False,
                )
            )
        fig.add_trace(
            go.Scatter(
                x=table["layer"],
                y=table[column],
                mode="lines+markers",
                name=name,
                line={"color": colour},
                hovertemplate="layer %{x}<br>" + name + ": %{y:.3f}<extra></extra>",
            )
        )
    values = table[["knn_accuracy", "silhouette"]].to_numpy(dtype=float)
    if interval is not None:
        values = np.concatenate([values.ravel(), interval[["knn_low", "silhouette_low"]].to_numpy(dtype=float).ravel()])
    lowest = np.nanmin(values, initial=0.0)
    # Reference levels are legend entries, not annotations: a label written on the plot can sit on a data point.
    span = [table["layer"].min(), table["layer"].max()]
    references = [(0.0, "silhouette 0: no structure", "dot", OKABE_ITO[1])]
    if chance is not None and np.isfinite(chance):
        references.append((float(chance), f"1-NN chance ({chance:.2f})", "dash", OKABE_ITO[0]))
    for level, name, dash, colour in references:
        fig.add_trace(go.Scatter(x=span, y=[level, level], mode="lines", name=name, hoverinfo="skip",
                                 line={"color": colour, "dash": dash, "width": 1.5}))
    if current_layer is not None:
        fig.add_vline(x=current_layer, line_dash="dot", line_color="grey")
    fig.update_layout(
        title="Separation of the senses<br><sup>measured in the full embedding space</sup>",
        xaxis={"title": HIDDEN_STATE_AXIS, "dtick": 1},
        yaxis={"title": "score (cosine)", "range": [min(-0.2, float(lowest) - 0.05), 1.05]},
        legend={"orientation": "h", "y": -0.25},
        height=520,
        margin={"l": 50, "r": 20, "t": 60, "b": 40},
    )
    return fig


OWN_SENTENCE = "your sentence"


def add_own_sentence(fig: go.Figure, xy: np.ndarray, hover: str) -> go.Figure:
    """Add the user's occurrence at ``xy`` ``[2]`` (already placed in the figure's map) as a black star
    labelled "your sentence"; ``hover`` is escaped HTML. Returns a new figure."""
    fig = go.Figure(fig)
    fig.add_trace(
        go.Scatter(
            x=[float(xy[0])],
            y=[float(xy[1])],
            mode="markers+text",
            name=OWN_SENTENCE,
            text=[OWN_SENTENCE],
            textposition="top center",
            textfont={"size": 14, "color": "black"},
            marker={"size": 20, "symbol": "star", "color": "black", "line": {"width": 1.5, "color": "white"}},
            customdata=[[OWN_SENTENCE, hover]],
            hovertemplate="%{customdata[0]}<br>%{customdata[1]}<extra></extra>",
        )
    )
    return fig
