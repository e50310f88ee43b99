"""A room's figures: the bundled sentences' map with every learner's sentence on it, and the vote beside the
measured previous-token scores. Learners' text reaches these figures only through ``plotly_safe``."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.common import COLORBLIND_SAFE
from viz.senses import highlighted_sentence, sense_projection_figure

LEARNERS = "learners' sentences"
YOURS = "your sentence"


def room_map_figure(coords: np.ndarray, labels: list[str], hovers: list[str], entries_xy: np.ndarray,
                    entry_texts: list[str], entry_spans: list[tuple[int, int]], own: list[bool], *, title: str,
                    axis: str) -> go.Figure:
    """The bundled occurrences (``sense_projection_figure``) and the learners' entries at ``entries_xy`` ``[M, 2]``
    (open diamonds; the viewer's own, where ``own`` is True, as black stars). Entry hovers are the escaped sentence."""
    if entries_xy.shape != (len(entry_texts), 2) or len(own) != len(entry_texts) or len(entry_spans) != len(own):
        raise ValueError(f"{entries_xy.shape} places for {len(entry_texts)} entries")
    fig = sense_projection_figure(coords, labels, hovers, title=title, axis=axis)
    for name, mine in ((LEARNERS, False), (YOURS, True)):
        rows = [i for i, is_own in enumerate(own) if is_own == mine]
        if not rows:
            continue
        marker = ({"size": 18, "symbol": "star", "color": "black", "line": {"width": 1.5, "color": "white"}} if mine
                  else {"size": 12, "symbol": "diamond-open", "color": "#D55E00", "line": {"width": 2}})
        fig.add_trace(go.Scatter(
            x=entries_xy[rows, 0], y=entries_xy[rows, 1], mode="markers", name=name, marker=marker,
            customdata=[[name, highlighted_sentence(entry_texts[i], entry_spans[i])] for i in rows],
            hovertemplate="%{customdata[0]}<br>%{customdata[1]}<extra></extra>"))
    return fig


def vote_figure(counts: np.ndarray, scores: np.ndarray | None, chance: float | None) -> go.Figure:
    """Votes per head ``[layers, heads]``, and once revealed (``scores`` not None) the measured previous-token score
    of every head beside it, on the same grid, with its chance level in the colour bar's title."""
    layers, heads = counts.shape
    panels = 1 if scores is None else 2
    titles = ["Learners' votes"] + ([f"Measured previous-token score (chance {chance:.2f})"] if panels == 2 else [])
    fig = make_subplots(rows=1, cols=panels, subplot_titles=titles, horizontal_spacing=0.12)
    x, y = [f"H{h}" for h in range(heads)], [f"L{layer}" for layer in range(layers)]
    fig.add_trace(go.Heatmap(z=counts, x=x, y=y, colorscale="Blues", zmin=0, text=counts, texttemplate="%{text}",
                             colorbar={"title": {"text": "votes"}, "x": 0.44 if panels == 2 else 1.02},
                             hovertemplate="layer %{y}, head %{x}: %{z} votes<extra></extra>"), row=1, col=1)
    if scores is not None:
        fig.add_trace(go.Heatmap(z=scores, x=x, y=y, colorscale=COLORBLIND_SAFE, zmin=0, zmax=1,
                                 text=np.round(scores, 2), texttemplate="%{text}", colorbar={"title": {"text": "score"}},
                                 hovertemplate="layer %{y}, head %{x}: %{z:.3f}<extra></extra>"), row=1, col=2)
    for col in range(1, panels + 1):
        fig.update_yaxes(autorange="reversed", title_text="layer (counted from 0)", row=1, col=col)
        fig.update_xaxes(title_text="head", row=1, col=col)
    fig.update_layout(height=max(320, 40 * layers + 140), margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return fig

