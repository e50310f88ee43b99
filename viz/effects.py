"""Figures for "does it matter?": importance vs attention, coloured attributions, the logit lens."""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.maths.numbers import percent, probability
from core.model.layers import HIDDEN_STATE_AXIS
from viz.common import OKABE_ITO, plotly_safe, token_axis
from viz.predictions import candidate_cells

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
    fig = go.Figure(candidate_cells(
        candidates, probabilities, x=list(range(columns)),
        hovertemplate="hidden state %{y}, position %{x}: %{customdata} · %{z:.4f}<extra></extra>", xgap=1, ygap=1,
    ))
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
        xaxis={"title": HIDDEN_STATE_AXIS, "dtick": 1},
        # decades only (1, 10, 100 …): Plotly's minor labels 2 … 9 pile up on a short log axis; 1 = top on top
        yaxis={"title": "rank of the final prediction (1 = top)", "type": "log", "dtick": 1,
               "range": [float(np.log10(max(10, shown.max()) * 1.5)), float(np.log10(0.8))]},
        height=340,
        margin={"l": 60, "r": 20, "t": 50, "b": 60},
    )
    return fig


def knockout_figure(heads: list[str], shares: dict[str, list[float]], changes: list[float], *, chance: float | None,
                    title: str) -> go.Figure:
    """Where each knocked-out head looks beside what knocking it out changes, one row of two panels.

    ``heads``: one name per head; ``shares``: per kind of attention (e.g. "on start/end tokens"), each head's share;
    ``changes``: each head's 1 − cosine between the plain and the ablated sentence embedding; ``chance``: the
    previous-token share of an even spread, drawn as a dashed line (None: not drawn)."""
    names = [plotly_safe(h) for h in heads]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14,
                        subplot_titles=("Where the head looks (attention share)", "What it changes (1 − cosine)"))
    for colour, (kind, values) in zip(OKABE_ITO, shares.items()):
        fig.add_trace(go.Bar(x=names, y=values, name=plotly_safe(kind), marker_color=colour, text=[percent(v) for v in values],
                             textposition="outside", hovertemplate="%{x}: %{y:.1%}<extra>" + plotly_safe(kind) + "</extra>"),
                      row=1, col=1)
    if chance is not None and np.isfinite(chance):
        # named in the legend, not beside the line, where the bars' own labels are
        fig.add_hline(y=chance, line_dash="dash", line_color="grey", row=1, col=1)
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line={"dash": "dash", "color": "grey"},
                                 name="previous token, even spread", hoverinfo="skip"), row=1, col=1)
    fig.add_trace(go.Bar(x=names, y=changes, name="1 − cosine, sentence embedding", marker_color=OKABE_ITO[2 % len(OKABE_ITO)],
                         text=[f"{v:.2g}" for v in changes], textposition="outside", showlegend=False,
                         hovertemplate="%{x}: 1 − cosine %{y:.3g}<extra></extra>"), row=1, col=2)
    fig.update_yaxes(range=[0, 1.15], tickformat=".0%", row=1, col=1)
    fig.update_yaxes(range=[0, max([*changes, 1e-12]) * 1.25], title_text="1 − cosine", row=1, col=2)
    fig.update_layout(title=plotly_safe(title), barmode="group", height=420, legend={"orientation": "h", "y": -0.15},
                      margin={"l": 60, "r": 20, "t": 90, "b": 80})
    return fig


def knockout_drop_words(drop: float) -> str:
    """The drop in log p(target), the page's one sign convention (positive = less likely), and what its sign means."""
    if round(drop, 3) == 0:
        return f"drop in log p(target) **{drop:+.3f}**: the target is about as likely as before"
    return (f"drop in log p(target) **{drop:+.3f}**: the target became "
            f"{'less' if drop > 0 else 'more'} likely with the knock-out")


def knockout_target_sentence(token: str, position: int, logp_before: float, logp_after: float) -> str:
    """What a knock-out did to the target token's log-probability and probability (``token``: its label, already
    escaped for markdown); a small probability keeps two significant digits (``core.maths.numbers.probability``)."""
    return (f"**log p(“{token}”)**: {logp_before:.3f} → {logp_after:.3f} at position {position}; "
            f"{knockout_drop_words(logp_before - logp_after)} "
            f"(probability {probability(math.exp(logp_before))} → {probability(math.exp(logp_after))}).")
