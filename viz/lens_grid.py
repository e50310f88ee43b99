"""The logit lens for every position: a hidden state × position grid coloured by the final prediction's rank."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from core.lens_grid import LensSummary
from core.tokens import quoted_token
from viz.common import plotly_safe, token_axis
from viz.predictions import visible_spaces


def final_rank_grid(labels: list[str], top_tokens: list[list[str]], final_ranks: np.ndarray, summary: LensSummary,
                    final: list[str]) -> go.Figure:
    """Cell ``[l, t]``: hidden state ``l``'s top token at position ``t`` (``top_tokens[l][t]``), coloured by the
    rank there of the final prediction ``final[t]`` (log scale, dark = top); a ring marks where it stays top-1."""
    rows, columns = final_ranks.shape
    text = np.array([[plotly_safe(visible_spaces(c)) for c in row] for row in top_tokens], dtype=object)
    finals = np.array([[plotly_safe(visible_spaces(f)) for f in final]] * rows, dtype=object)
    fig = go.Figure(go.Heatmap(
        z=np.log10(final_ranks + 1), x=list(range(columns)), y=list(range(rows)), text=text, texttemplate="%{text}",
        customdata=np.dstack([finals, final_ranks + 1]), colorscale="Viridis", reversescale=True, zmin=0,
        hovertemplate="hidden state %{y}, position %{x}: top %{text}; final %{customdata[0]} at rank "
                      "%{customdata[1]}<extra></extra>",
        colorbar={"title": {"text": "rank of final"}, "tickvals": [0, 1, 2, 3, 4],
                  "ticktext": ["1", "10", "100", "1k", "10k"]}, xgap=1, ygap=1,
    ))
    fig.add_scatter(x=list(range(columns)), y=summary.settled.tolist(), mode="markers", name="stays top-1 from here",
                    marker={"symbol": "circle-open", "size": 16, "color": "#D55E00", "line": {"width": 3}},
                    hovertemplate="position %{x}: top-1 from hidden state %{y} on<extra></extra>")
    fig.update_layout(
        title="Logit lens: each layer's top token, coloured by the rank of the final prediction",
        xaxis=token_axis([visible_spaces(label) for label in labels]) | {"title": "position (its own token)",
                                                                          "tickangle": -45},
        yaxis={"title": "hidden state (0 = embedding output)", "dtick": 1 if rows <= 16 else 2},
        height=min(1100, 200 + 26 * rows), margin={"l": 70, "r": 20, "t": 50, "b": 90},
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


def lens_sentence(labels: list[str], final: list[str], summary: LensSummary, layers: int) -> str:
    """When the final predictions settle, from the numbers (plain text)."""
    t_late = int(np.argmax(summary.settled))
    t_early = int(np.argmin(summary.settled))
    return (f"Over {len(labels)} positions, the final prediction stays on top from hidden state "
            f"{np.mean(summary.settled):.1f} on average (of {layers}). Earliest: after "
            f"{quoted_token(labels[t_early])} ({quoted_token(final[t_early])}, from hidden state "
            f"{summary.settled[t_early]}); latest: after {quoted_token(labels[t_late])} ({quoted_token(final[t_late])}, "
            f"only from hidden state {summary.settled[t_late]}). It first reaches the top at hidden "
            f"state {np.mean(summary.first_top):.1f} on average.")
