"""Figures of a language model's own predictions: fill-ins for a mask, next tokens along a text."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from core.tokens import readable_token
from viz.common import OKABE_ITO, SEQUENTIAL, plotly_safe, token_axis


def visible_spaces(token: str) -> str:
    """A decoded token as its label, by the app's one rule (``core.tokens.readable_token``): spaces as "·" (GPT-2's
    " bank" vs "bank"), a newline as ``\\n``; not yet escaped."""
    return readable_token(token)


def fill_in_bars(candidates: list[str], probabilities: np.ndarray, *, title: str) -> go.Figure:
    """Horizontal bars of the top-k candidates ``[k]`` for one position, most likely on top."""
    labels = [visible_spaces(c) for c in candidates]
    k = len(labels)
    fig = go.Figure(
        go.Bar(
            x=probabilities,
            y=list(range(k)),
            orientation="h",
            customdata=[plotly_safe(label) for label in labels],
            marker_color=OKABE_ITO[0],
            text=[f"{p:.1%}" for p in probabilities],
            textposition="outside",
            hovertemplate="%{customdata}: %{x:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=plotly_safe(title),
        xaxis={"title": "probability", "range": [0, min(1.0, float(np.max(probabilities, initial=0.0)) * 1.25 + 0.02)]},
        yaxis=token_axis(labels) | {"title": "candidate", "range": [k - 0.5, -0.5]},
        height=120 + 28 * k,
        margin={"l": 110, "r": 20, "t": 50, "b": 50},
    )
    return fig


def candidate_heatmap(candidates: list[list[str]], probabilities: np.ndarray, *, x: list[int], hovertemplate: str,
                      **trace) -> go.Heatmap:
    """A heatmap trace whose cell ``[i, j]`` writes the token ``candidates[i][j]`` (escaped, spaces visible)
    and is coloured by its probability ``probabilities[i, j]`` (0 → 1). ``trace``: further Heatmap options."""
    text = np.array([[plotly_safe(visible_spaces(c)) for c in row] for row in candidates], dtype=object)
    return go.Heatmap(
        z=probabilities, x=x, y=list(range(probabilities.shape[0])), text=text, texttemplate="%{text}",
        customdata=text, colorscale=SEQUENTIAL, zmin=0.0, zmax=1.0, colorbar={"title": {"text": "probability"}},
        hovertemplate=hovertemplate, **trace,
    )


NARROW_PX = 500  # below this width (a phone) the colour bar and the long axis titles would leave the cells ~110 px


def next_token_heatmap(context: list[str], candidates: list[list[str]], probabilities: np.ndarray, *,
                       narrow: bool = False) -> go.Figure:
    """Rows: positions of the text (``context[i]`` = the token read last); columns: rank 1..k.

    Each cell shows the candidate next token; its colour is the probability ``probabilities[i, r]``. ``narrow`` (a
    column under ``NARROW_PX``): no colour bar (the hover gives each probability) and short axis titles, so the cells
    keep most of the width.
    """
    rows, k = probabilities.shape
    fig = go.Figure(candidate_heatmap(candidates, probabilities, x=list(range(1, k + 1)),
                                      hovertemplate="rank %{x}: %{customdata} · %{z:.4f}<extra></extra>",
                                      showscale=not narrow))
    fig.update_layout(
        title="The model's top next tokens after each position",
        xaxis={"title": "rank" if narrow else "rank (1 = most likely next token)", "dtick": 1},
        yaxis=token_axis([visible_spaces(c) for c in context])
        | {"title": "text so far" if narrow else "text so far ends with", "range": [rows - 0.5, -0.5]},
        height=min(1400, 160 + 26 * rows),
        margin={"l": 110, "r": 20, "t": 50, "b": 60},
    )
    return fig
