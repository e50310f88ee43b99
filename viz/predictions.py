"""Figures of a language model's own predictions: fill-ins for a mask, next tokens along a text."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale, unlabel_rgb

from core.maths.numbers import probability
from core.model.tokens import readable_token
from viz.common import OKABE_ITO, SEQUENTIAL, plotly_safe, token_axis
from viz.lens_grid import ASSUMED_WIDTH_PX, CELL_FONT_PX, contrast_ratio, fitted_cell_text


def visible_spaces(token: str) -> str:
    """A decoded token as its label, by the app's one rule (``core.model.tokens.readable_token``): spaces as "·" (GPT-2's
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
            text=[probability(p) for p in probabilities],
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


def candidate_cells(candidates: list[list[str]], probabilities: np.ndarray, *, x: list[int], hovertemplate: str,
                    **trace) -> list:
    """Two traces: a heatmap whose cell ``[i, j]`` is coloured by the probability ``probabilities[i, j]`` (0 → 1)
    of the token ``candidates[i][j]`` (named in the hover), and over it the tokens (escaped, spaces visible) as text,
    each black or white, whichever contrasts more with its cell (at least 4.5:1). ``trace``: further Heatmap
    options."""
    names = [[visible_spaces(c) for c in row] for row in candidates]
    text = np.array([[plotly_safe(c) for c in row] for row in names], dtype=object)
    rows, columns = np.shape(probabilities)
    heatmap = go.Heatmap(
        z=probabilities, x=x, y=list(range(rows)), customdata=text, colorscale=SEQUENTIAL, zmin=0.0, zmax=1.0,
        colorbar={"title": {"text": "probability"}}, hovertemplate=hovertemplate, **trace,
    )
    # A heatmap's text takes one colour (Plotly's automatic one falls below 4.5:1 on Viridis's middle greens).
    cells = np.array([unlabel_rgb(c) for c in sample_colorscale(SEQUENTIAL, np.clip(np.ravel(probabilities), 0, 1))])
    black = contrast_ratio(cells, np.zeros(3)) >= contrast_ratio(cells, np.full(3, 255.0))
    cell_px = ASSUMED_WIDTH_PX / max(columns, 1)
    words = go.Scatter(
        x=[x[j] for _ in range(rows) for j in range(columns)], y=[i for i in range(rows) for _ in range(columns)],
        mode="text", text=[plotly_safe(fitted_cell_text(c, cell_px)) for row in names for c in row],
        hoverinfo="skip", showlegend=False,
        textfont={"size": CELL_FONT_PX, "color": np.where(black, "#000000", "#FFFFFF").tolist()},
    )
    return [heatmap, words]


NARROW_PX = 500  # below this width (a phone) the colour bar and the long axis titles would leave the cells ~110 px


def next_token_heatmap(context: list[str], candidates: list[list[str]], probabilities: np.ndarray, *,
                       narrow: bool = False) -> go.Figure:
    """Rows: positions of the text (``context[i]`` = the token read last); columns: rank 1..k.

    Each cell shows the candidate next token; its colour is the probability ``probabilities[i, r]``. ``narrow`` (a
    column under ``NARROW_PX``): no colour bar (the hover gives each probability) and short axis titles, so the cells
    keep most of the width.
    """
    rows, k = probabilities.shape
    fig = go.Figure(candidate_cells(candidates, probabilities, x=list(range(1, k + 1)),
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
