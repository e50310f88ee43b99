"""The logit lens for every position: a hidden state × position grid coloured by the final prediction's rank."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from core.lens_grid import LensSummary
from viz.common import plotly_safe, token_axis
from viz.predictions import visible_spaces


def final_rank_grid(labels: list[str], top_tokens: list[list[str]], final_ranks: np.ndarray, summary: LensSummary,
                    final: list[str], *, first: int = 0) -> go.Figure:
    """Cell ``[l, t]``: hidden state ``l``'s top token at position ``first + t`` (``top_tokens[l][t]``), coloured by
    the rank there of the final prediction ``final[t]`` (log scale, dark = top); a ring marks where it stays top-1."""
    rows, columns = final_ranks.shape
    positions = list(range(first, first + columns))
    axis = token_axis(labels)
    axis |= {"tickvals": [first + v for v in axis["tickvals"]], "range": [first - 0.5, first + columns - 0.5]}
    text = np.array([[plotly_safe(visible_spaces(c)) for c in row] for row in top_tokens], dtype=object)
    finals = np.array([[plotly_safe(visible_spaces(f)) for f in final]] * rows, dtype=object)
    fig = go.Figure(go.Heatmap(
        z=np.log10(final_ranks + 1), x=positions, y=list(range(rows)), text=text, texttemplate="%{text}",
        customdata=np.dstack([finals, final_ranks + 1]), colorscale="Viridis", reversescale=True, zmin=0,
        hovertemplate="hidden state %{y}, position %{x}: top %{text}; final %{customdata[0]} at rank "
                      "%{customdata[1]}<extra></extra>",
        colorbar={"title": {"text": "rank of final"}, "tickvals": [0, 1, 2, 3, 4],
                  "ticktext": ["1", "10", "100", "1k", "10k"]}, xgap=1, ygap=1,
    ))
    fig.add_scatter(x=positions, y=summary.settled.tolist(), mode="markers", name="stays top-1 from here",
                    marker={"symbol": "circle-open", "size": 16, "color": "#D55E00", "line": {"width": 3}},
                    hovertemplate="position %{x}: top-1 from hidden state %{y} on<extra></extra>")
    fig.update_layout(
        title="Logit lens: each layer's top token, coloured by the rank of the final prediction",
        xaxis=axis | {"title": "position (its own token)", "tickangle": -45},
        yaxis={"title": "hidden state (0 = embedding output)", "dtick": 1 if rows <= 16 else 2},
        height=min(1100, 200 + 26 * rows), margin={"l": 70, "r": 20, "t": 50, "b": 90},
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


def lens_sentence(labels: list[str], final: list[str], summary: LensSummary, layers: int, *, first: int = 0,
                  total: int | None = None) -> str:
    """When the final predictions settle, from the numbers (plain text); ``labels`` are positions ``first`` on, of
    ``total`` (default: ``labels`` are all of them)."""
    t_late = int(np.argmax(summary.settled))
    t_early = int(np.argmin(summary.settled))
    shown = (f"Over positions {first} to {first + len(labels) - 1} (of the text's {total})"
             if total is not None and total > len(labels) else f"Over {len(labels)} positions")
    return (f"{shown}, the final prediction stays on top from hidden state "
            f"{np.mean(summary.settled):.1f} on average (of {layers}). Earliest: after {labels[t_early]!r} "
            f"({final[t_early]!r}, from hidden state {summary.settled[t_early]}); latest: after {labels[t_late]!r} "
            f"({final[t_late]!r}, only from hidden state {summary.settled[t_late]}). It first reaches the top at hidden "
            f"state {np.mean(summary.first_top):.1f} on average.")
