"""Violin plots of how far each layer moves the documents of a corpus (pure Plotly, no Streamlit)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from core.model.layers import HIDDEN_STATE_AXIS
from viz.common import OKABE_ITO, plotly_safe


def _violins(x: pd.Series, y: pd.Series, names: pd.Series, *, name: str, x_label: str) -> go.Violin:
    """One violin per distinct ``x``; every point is a document whose (escaped) title is in its hover."""
    return go.Violin(
        x=x,
        y=y,
        customdata=[plotly_safe(n) for n in names],
        hovertemplate=f"%{{customdata}}<br>{x_label}%{{x}}<br>%{{y:.3f}}<extra></extra>",
        hoveron="points",
        points="all",
        pointpos=0,
        jitter=0.5,
        marker={"size": 4, "opacity": 0.7, "color": OKABE_ITO[0]},
        line={"color": OKABE_ITO[0]},
        fillcolor="rgba(0, 114, 178, 0.25)",
        box_visible=True,
        meanline_visible=True,
        spanmode="hard",
        name=name,
    )


def documents_phrase(n: int) -> str:
    """``1 document``, ``12 documents``: for captions and titles."""
    return f"{n} document{'' if n == 1 else 's'}"


def layer_violin_figure(
    table: pd.DataFrame,
    titles: list[str],
    *,
    value: str,
    value_label: str,
    title: str,
    baseline: pd.DataFrame | None = None,
    token_baseline: pd.DataFrame | None = None,
    adjusted: bool = False,
) -> go.Figure:
    """Violins of ``table[value]`` per ``table.layer`` (1..L); ``table.document`` indexes ``titles``.

    ``baseline``: optional rows ``layer``, ``baseline``, ``anisotropy`` drawn as lines beside the
    violins (raw view). ``adjusted``: ``value`` is already similarity − baseline, and a zero line marks the
    baseline (no line otherwise: a single document has no baseline).
    ``token_baseline``: optional rows ``layer``, ``anisotropy`` of single words (random word pairs from
    different documents, ``core.representations.contextuality``), drawn beside the pooled baseline in the raw view.
    """
    fig = go.Figure(_violins(table["layer"], table[value], table["document"].map(lambda i: titles[i]), name="documents", x_label="hidden state "))
    if baseline is not None:
        for column, label, colour, dash in (
            ("baseline", "different documents, same comparison", OKABE_ITO[1], "dash"),
            ("anisotropy", "anisotropy: different documents, same layer (Ethayarajh 2019)", OKABE_ITO[5], "dot"),
        ):
            fig.add_trace(
                go.Scatter(
                    x=baseline["layer"],
                    y=baseline[column],
                    mode="lines+markers",
                    name=label,
                    line={"color": colour, "dash": dash},
                    marker={"symbol": "diamond", "size": 9},
                    hovertemplate=f"{label}<br>hidden state %{{x}}<br>%{{y:.3f}}<extra></extra>",
                )
            )
        if token_baseline is not None:
            rows = token_baseline[token_baseline["layer"].isin(table["layer"].unique())]
            label = "anisotropy of single words: random words from different documents (Ethayarajh 2019)"
            fig.add_trace(
                go.Scatter(
                    x=rows["layer"],
                    y=rows["anisotropy"],
                    mode="lines+markers",
                    name=label,
                    line={"color": OKABE_ITO[7], "dash": "dashdot"},
                    marker={"symbol": "circle-open", "size": 9},
                    hovertemplate="single words, different documents<br>hidden state %{x}<br>%{y:.3f}<extra></extra>",
                )
            )
    if adjusted:
        fig.add_hline(y=0, line_dash="dash", line_color=OKABE_ITO[1], annotation_text="baseline")
    layers = sorted(table["layer"].unique())
    fig.update_layout(
        title=title,
        xaxis={"title": HIDDEN_STATE_AXIS, "tickmode": "array", "tickvals": layers},
        yaxis={"title": value_label},
        legend={"orientation": "h", "y": -0.25},
        height=480,
        margin={"t": 60, "b": 40},
        violinmode="overlay",
    )
    return fig


def cls_violin_figure(table: pd.DataFrame, titles: list[str], *, title: str) -> go.Figure:
    """One violin per ``table.comparison`` of ``table.cosine_similarity``; hover names the document."""
    fig = go.Figure(
        _violins(
            table["comparison"],
            table["cosine_similarity"],
            table["document"].map(lambda i: titles[i]),
            name="documents",
            x_label="",
        )
    )
    fig.update_layout(
        title=title, yaxis={"title": "cosine similarity"}, xaxis={"title": None}, height=420, showlegend=False
    )
    return fig


CONTEXTUALITY_LINES = {
    "self_similarity": ("self-similarity: one word, different documents", OKABE_ITO[0], "solid"),
    "intra_sentence": ("intra-sentence similarity: each word vs its sentence's mean", OKABE_ITO[2], "solid"),
    "anisotropy": ("baseline: random words from different documents", OKABE_ITO[7], "dot"),
}


def contextuality_figure(table: pd.DataFrame, *, adjusted: bool, title: str) -> go.Figure:
    """Lines over hidden states 0..L of ``core.representations.contextuality`` measures: raw with the anisotropy baseline,
    or (``adjusted``) each minus the baseline, with a zero line."""
    fig = go.Figure()
    for column, (label, colour, dash) in CONTEXTUALITY_LINES.items():
        if adjusted and column == "anisotropy":
            continue
        y = table[f"{column}_adjusted"] if adjusted else table[column]
        shown = f"{label} − baseline" if adjusted else label
        fig.add_trace(
            go.Scatter(
                x=table["layer"],
                y=y,
                mode="lines+markers",
                name=shown,
                line={"color": colour, "dash": dash, "width": 3 if column == "self_similarity" else 2},
                hovertemplate=f"{shown}<br>hidden state %{{x}}<br>%{{y:.3f}}<extra></extra>",
            )
        )
    if adjusted:
        fig.add_hline(y=0, line_dash="dot", line_color=OKABE_ITO[7], annotation_text="baseline")
    fig.update_layout(
        title=title,
        xaxis={"title": HIDDEN_STATE_AXIS, "dtick": 1},
        yaxis={"title": "cosine similarity − baseline" if adjusted else "cosine similarity"},
        legend={"orientation": "h", "y": -0.25},
        height=440,
        margin={"t": 60, "b": 40},
    )
    return fig
