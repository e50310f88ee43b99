"""Figures and sentences of sampling: the next-token distribution with its kept and cut tokens."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from core.maths.numbers import fixed, probability
from core.model.tokens import quoted_token
from core.outputs.generation import Distribution
from viz.common import OKABE_ITO, plotly_safe, token_axis
from viz.predictions import visible_spaces

CUT_GREY = "#BBBBBB"


def distribution_bars(d: Distribution, labels: list[str], *, shown: int = 20) -> go.Figure:
    """The ``shown`` most likely tokens (``labels``: their text, in ``d.order``): light bars at the chosen
    temperature before the cuts, dark bars for the renormalised sampling probability; cut tokens grey."""
    n = min(shown, len(d.order))
    names = [visible_spaces(label) for label in labels[:n]]
    kept = d.kept[:n]
    fig = go.Figure()
    fig.add_bar(y=list(range(n)), x=d.scaled[:n], orientation="h", name="before the cuts",
                marker_color=[OKABE_ITO[4] if k else CUT_GREY for k in kept], opacity=0.45,
                customdata=[plotly_safe(s) for s in names], hovertemplate="%{customdata}: %{x:.4f} before<extra></extra>")
    fig.add_bar(y=list(range(n)), x=d.probs[:n], orientation="h", name="sampled from (renormalised)",
                marker_color=OKABE_ITO[0], customdata=[plotly_safe(s) for s in names],
                text=[probability(p) if k else "cut" for p, k in zip(d.probs[:n], kept)], textposition="outside",
                hovertemplate="%{customdata}: %{x:.4f} after<extra></extra>")
    top = float(max(d.probs[:n].max(initial=0), d.scaled[:n].max(initial=0)))
    fig.update_layout(
        title=f"Next token at temperature {d.temperature:g}, top-k {d.top_k or 'off'}, top-p {d.top_p:g}",
        barmode="overlay", xaxis={"title": "probability", "range": [0, min(1.0, top * 1.25 + 0.03)]},
        yaxis=token_axis(names) | {"title": "token (best first)", "range": [n - 0.5, -0.5]},
        height=140 + 24 * n, margin={"l": 110, "r": 20, "t": 50, "b": 50}, legend={"orientation": "h", "y": -0.12},
    )
    return fig


def distribution_sentence(d: Distribution, labels: list[str]) -> str:
    """What the controls did, from the numbers (plain text; escape it for markdown)."""
    kept = int(d.kept.sum())
    best = labels[0]
    cuts = (f"{kept:,} of {len(d.order):,} tokens can be drawn; the rest are cut." if kept < len(d.order) else
            f"All {kept:,} tokens can be drawn; nothing is cut.")
    return (f"{cuts} The most likely, {quoted_token(best)}, has {probability(d.scaled[0])} at this temperature and "
            f"{probability(d.probs[0])} after the cuts. Entropy {fixed(d.entropy_before)} nats before the cuts, "
            f"{fixed(d.entropy_after)} after" + (" (one token left: sampling is greedy)." if kept == 1 else "."))


def distribution_table(d: Distribution, labels: list[str], *, shown: int = 50) -> dict[str, list]:
    """The first ``shown`` tokens as columns for a CSV."""
    n = min(shown, len(d.order))
    return {"rank": list(range(1, n + 1)), "token_id": d.order[:n].tolist(), "token": labels[:n],
            "probability_t1": d.raw[:n].tolist(), "probability_at_temperature": d.scaled[:n].tolist(),
            "kept": d.kept[:n].tolist(), "sampling_probability": d.probs[:n].tolist()}


def steps_figure(tokens: list[str], probabilities: np.ndarray, chosen: list[bool]) -> go.Figure:
    """One bar per generated token: the model's probability for it (branch tokens chosen by hand in orange)."""
    names = [visible_spaces(t) for t in tokens]
    fig = go.Figure(go.Bar(
        x=list(range(len(names))), y=probabilities,
        marker_color=[OKABE_ITO[1] if c else OKABE_ITO[0] for c in chosen],
        customdata=[plotly_safe(s) for s in names], hovertemplate="%{customdata}: %{y:.4f}<extra></extra>",
    ))
    fig.update_layout(title="Each generated token's probability (orange: chosen by hand)",
                      xaxis=token_axis(names) | {"title": "generated token"},
                      yaxis={"title": "probability", "range": [0, 1]}, height=320,
                      margin={"l": 60, "r": 20, "t": 50, "b": 80})
    return fig
