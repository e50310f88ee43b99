"""Figures for "does it matter?": importance vs attention, coloured attributions, the logit lens."""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from viz.common import OKABE_ITO, SEQUENTIAL, plotly_safe, token_axis
from viz.predictions import visible_spaces

# Orange for positive, purple for negative (Okabe–Ito; distinguishable with common colour-vision deficiencies).
POSITIVE_RGB = (230, 159, 0)
NEGATIVE_RGB = (204, 121, 167)


def attribution_html(labels: list[str], scores: np.ndarray) -> str:
    """The tokens as coloured text: background strength ∝ |score| / max |score|, orange positive, purple negative.

    Every label is HTML-escaped; the hover title gives the score.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if len(labels) != len(scores):
        raise ValueError(f"{len(scores)} scores for {len(labels)} labels")
    top = float(np.abs(scores).max(initial=0.0)) or 1.0
    spans = []
    for label, score in zip(labels, scores):
        r, g, b = POSITIVE_RGB if score >= 0 else NEGATIVE_RGB
        alpha = min(1.0, abs(score) / top)
        spans.append(
            f'<span title="{score:+.4g}" style="background: rgba({r}, {g}, {b}, {alpha:.3f}); padding: 0.1em 0.25em; '
            f'margin: 0.1em; border-radius: 0.25em; display: inline-block; color: #111">{html.escape(label)}</span>'
        )
    legend = (
        '<div style="font-size: 0.8em; color: #555; margin-top: 0.3em">'
        f'<span style="background: rgb{POSITIVE_RGB}; padding: 0 0.4em">&nbsp;</span> raises the measure &nbsp; '
        f'<span style="background: rgb{NEGATIVE_RGB}; padding: 0 0.4em">&nbsp;</span> lowers it &nbsp; '
        "(hover a token for its score)</div>"
    )
    return '<div style="line-height: 2; font-size: 1.05em">' + "".join(spans) + "</div>" + legend


def lens_grid(labels: list[str], candidates: list[list[str]], probabilities: np.ndarray, *, title: str) -> go.Figure:
    """Rows: hidden states 0..L (0 at the bottom); columns: positions. Each cell shows the top token
    ``candidates[l][t]``; its colour is that token's probability ``probabilities[l, t]``."""
    rows, columns = probabilities.shape
    text = np.array([[plotly_safe(visible_spaces(c)) for c in row] for row in candidates], dtype=object)
    fig = go.Figure(
        go.Heatmap(
            z=probabilities,
            x=list(range(columns)),
            y=list(range(rows)),
            text=text,
            texttemplate="%{text}",
            customdata=text,
            colorscale=SEQUENTIAL,
            zmin=0.0,
            zmax=1.0,
            colorbar={"title": {"text": "probability"}},
            hovertemplate="hidden state %{y}, position %{x}: %{customdata} · %{z:.4f}<extra></extra>",
            xgap=1,
            ygap=1,
        )
    )
    fig.update_layout(
        title=plotly_safe(title),
        xaxis=token_axis(labels) | {"title": "position (its own token)", "tickangle": -45},
        yaxis={"title": "hidden state (0 = embedding output)", "dtick": 1},
        height=min(900, 200 + 40 * rows),
        margin={"l": 70, "r": 20, "t": 50, "b": 90},
    )
    return fig


def rank_by_layer(ranks: np.ndarray, *, title: str) -> go.Figure:
    """Line chart of the final prediction's rank (1 = top) at every hidden state ``[layers + 1]``, log scale."""
    shown = np.asarray(ranks, dtype=np.int64) + 1
    fig = go.Figure(
        go.Scatter(
            x=list(range(len(shown))),
            y=shown,
            mode="lines+markers",
            line={"color": OKABE_ITO[0], "width": 3},
            hovertemplate="hidden state %{x}: rank %{y}<extra></extra>",
        )
    )
    fig.update_layout(
        title=plotly_safe(title),
        xaxis={"title": "hidden state (0 = embedding output)", "dtick": 1},
        yaxis={"title": "rank of the final prediction (1 = top)", "type": "log", "autorange": "reversed"},
        height=340,
        margin={"l": 60, "r": 20, "t": 50, "b": 60},
    )
    return fig
