"""The guided tour's own small figures (the other steps reuse the pages' figures), and slide sizing."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from viz.common import OKABE_ITO, plotly_safe
from viz.compare import similarity_by_layer_chart

# Presentation mode: every figure 16:9, sized to fit beside a collapsed sidebar on a 1280-pixel screen.
SLIDE_WIDTH, SLIDE_HEIGHT = 960, 540


def token_table_figure(labels: list[str], ids: list[int], special: list[bool], *, title: str) -> go.Figure:
    """The tokens of a text as a table: position, token as it reads, vocabulary id, added by the tokenizer or not."""
    if not len(labels) == len(ids) == len(special):
        raise ValueError(f"{len(labels)} labels, {len(ids)} ids and {len(special)} flags")
    fig = go.Figure(
        go.Table(
            header={"values": ["position", "token", "id", "special"], "fill_color": OKABE_ITO[0], "font": {"color": "white"}},
            cells={
                "values": [
                    list(range(len(labels))),
                    [plotly_safe(label) for label in labels],
                    ids,
                    ["added by the tokenizer" if s else "" for s in special],
                ],
                "align": "left",
            },
            columnwidth=[1, 3, 2, 3],
        )
    )
    fig.update_layout(title=plotly_safe(title), height=min(620, 140 + 28 * len(labels)), margin={"l": 20, "r": 20, "t": 50, "b": 10})
    return fig


def cosine_bars(names: list[str], values: list[float], *, title: str) -> go.Figure:
    """One bar per named cosine similarity, value written on the bar; the axis runs to 1."""
    fig = go.Figure(
        go.Bar(
            x=[plotly_safe(name) for name in names],
            y=values,
            text=[f"{v:.4f}" for v in values],
            textposition="outside",
            marker_color=[OKABE_ITO[i % len(OKABE_ITO)] for i in range(len(values))],
            hovertemplate="%{x}: %{y:.4f}<extra></extra>",
        )
    )
    low = min([0.0, *values])
    fig.update_layout(
        title=plotly_safe(title),
        yaxis={"title": "cosine similarity", "range": [low - 0.05 if low < 0 else 0.0, 1.12]},
        height=380,
        margin={"l": 60, "r": 20, "t": 60, "b": 60},
    )
    return fig


def as_slide(fig: go.Figure) -> go.Figure:
    """A copy of ``fig`` sized 16:9 (``SLIDE_WIDTH`` × ``SLIDE_HEIGHT``) for a screenshot."""
    slide = go.Figure(fig)
    slide.update_layout(width=SLIDE_WIDTH, height=SLIDE_HEIGHT, autosize=False)
    return slide


def same_vector_chart(pair: pd.DataFrame, same: pd.DataFrame, word: str, lookup: float) -> go.Figure:
    """The same-vector step's chart: a word's cosine layer by layer in sentences A and B (``pair``, a
    ``core.representations.compare.word_similarity`` table) and in A and the control C (``same``), over the lookup's."""
    fig = similarity_by_layer_chart(pair, word, lookup)
    fig.data[0].name = "A vs B"
    fig.add_scatter(x=same["layer"], y=same["cosine_similarity"], mode="lines+markers", name="A vs C (control)",
                    line={"color": OKABE_ITO[2], "width": 3, "dash": "dot"},
                    hovertemplate="hidden state %{x}: cosine %{y:.4f}<extra></extra>")
    fig.update_layout(showlegend=True, legend={"orientation": "h", "y": -0.3},
                      title=f"“{plotly_safe(word)}”: A vs B, and the control A vs C", height=420)
    return fig
