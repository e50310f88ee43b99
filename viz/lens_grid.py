"""The logit lens for every position: a hidden state × position grid coloured by the final prediction's rank."""

from __future__ import annotations

import numpy as np
import plotly.colors
import plotly.graph_objects as go

from core.model.tokens import quoted_token, readable_token
from core.outputs.lens import LensSummary
from viz.common import plotly_safe, token_axis

CELL_FONT_PX = 12  # the cell tokens' size: legible at every window size (Plotly's automatic size fell to ~6 px)
CHAR_PX = 0.7 * CELL_FONT_PX  # the width of a character of DejaVu Sans (Debian's), about; most fonts are narrower
ASSUMED_WIDTH_PX = 820 - 90 - 100  # the page's figure width (ui.figures.NORMAL_WIDTH) less the margins and colour bar
RANK_DECADES = 4  # the colour scale runs from rank 1 to 10,000 (log10 of rank 0 → 4); ranks past it saturate
RING = "#D55E00"


def _relative_luminance(rgb: np.ndarray) -> np.ndarray:
    """WCAG 2 relative luminance of ``rgb`` ``[..., 3]`` in 0..255."""
    c = rgb / 255.0
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return linear @ np.array([0.2126, 0.7152, 0.0722])


def contrast_ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """WCAG 2 contrast ratio between colours ``a`` and ``b`` ``[..., 3]`` (1 to 21)."""
    la, lb = _relative_luminance(a), _relative_luminance(b)
    return (np.maximum(la, lb) + 0.05) / (np.minimum(la, lb) + 0.05)


def cell_colours(z: np.ndarray) -> np.ndarray:
    """The colour ``[..., 3]`` (0..255) Plotly gives a cell of value ``z`` on this grid's scale (reversed Viridis,
    0 → ``RANK_DECADES``), interpolated between the scale's stops as Plotly does."""
    stops = plotly.colors.get_colorscale("Viridis")
    positions = np.array([p for p, _ in stops])
    rgb = np.array([plotly.colors.unlabel_rgb(plotly.colors.convert_colors_to_same_type(c, "rgb")[0][0])
                    for _, c in stops])
    t = 1.0 - np.clip(np.asarray(z, dtype=float) / RANK_DECADES, 0.0, 1.0)  # reversed: rank 1 at the top of Viridis
    return np.stack([np.interp(t, positions, rgb[:, k]) for k in range(3)], axis=-1)


def text_colours(z: np.ndarray) -> np.ndarray:
    """Black or white per cell, whichever contrasts more with the cell's colour (always at least 4.58:1)."""
    cells = cell_colours(z)
    black = contrast_ratio(cells, np.zeros(3)) >= contrast_ratio(cells, np.full(3, 255.0))
    return np.where(black, "#000000", "#FFFFFF")


def fitted_cell_text(label: str, width_px: float) -> str:
    """``label`` cut to what fits a cell ``width_px`` wide at ``CELL_FONT_PX`` (its end shown as "…"); "" when
    not even two characters fit (the hover still names it)."""
    fits = int(width_px // CHAR_PX)
    if fits < 2:
        return ""
    return label if len(label) <= fits else label[: fits - 1] + "…"


def final_rank_grid(labels: list[str], top_tokens: list[list[str]], final_ranks: np.ndarray, summary: LensSummary,
                    final: list[str], *, first: int = 0) -> go.Figure:
    """Cell ``[l, t]``: hidden state ``l``'s top token at position ``first + t`` (``top_tokens[l][t]``), coloured by
    the rank there of the final prediction ``final[t]`` (log scale, reversed Viridis: rank 1 yellow); an outline
    around the cell marks where it stays top-1. ``labels``: the ``T`` tokens from ``first`` on, decoded."""
    rows, columns = final_ranks.shape
    positions = list(range(first, first + columns))
    axis = token_axis([readable_token(label) for label in labels])
    axis |= {"tickvals": [first + v for v in axis["tickvals"]], "range": [first - 0.5, first + columns - 0.5]}
    z = np.log10(final_ranks + 1)
    names = np.array([[readable_token(c) for c in row] for row in top_tokens], dtype=object)
    text = np.array([[plotly_safe(c) for c in row] for row in names], dtype=object)
    finals = np.array([[plotly_safe(readable_token(f)) for f in final]] * rows, dtype=object)
    fig = go.Figure(go.Heatmap(
        z=z, x=positions, y=list(range(rows)),
        customdata=np.dstack([text, finals, final_ranks + 1]), colorscale="Viridis", reversescale=True, zmin=0,
        zmax=RANK_DECADES,
        hovertemplate="hidden state %{y}, position %{x}: top %{customdata[0]}; final %{customdata[1]} at rank "
                      "%{customdata[2]}<extra></extra>",
        colorbar={"title": {"text": "rank of final"}, "tickvals": [0, 1, 2, 3, 4],
                  "ticktext": ["1", "10", "100", "1k", "10k"]}, xgap=1, ygap=1,
    ))
    # The tokens as a text trace: a heatmap's text takes one colour, and each cell needs the one that contrasts.
    cell_px = ASSUMED_WIDTH_PX / max(columns, 1)
    shown = [[plotly_safe(fitted_cell_text(c, cell_px)) for c in row] for row in names]
    fig.add_scatter(
        x=[first + t for _ in range(rows) for t in range(columns)], y=[l for l in range(rows) for _ in range(columns)],
        mode="text", text=[c for row in shown for c in row], hoverinfo="skip", showlegend=False,
        textfont={"size": CELL_FONT_PX, "color": text_colours(z).ravel().tolist()},
    )
    for t, l in enumerate(summary.settled.tolist()):  # outlines on the cell's edges, never over its text
        fig.add_shape(type="rect", x0=first + t - 0.5, x1=first + t + 0.5, y0=l - 0.5, y1=l + 0.5,
                      line={"color": RING, "width": 3})
    fig.update_layout(
        # no legend for the outline (the page's text names it): one under the plot collided with the turned labels
        title="Logit lens: each layer's top token, coloured by the rank of the final prediction",
        xaxis=axis | {"title": "position (its own token)", "tickangle": -45},
        yaxis={"title": "hidden state (0 = embedding output)", "dtick": 1 if rows <= 16 else 2,
               "range": [-0.5, rows - 0.5], "autorange": False},
        height=min(1100, 200 + 26 * rows), margin={"l": 70, "r": 20, "t": 50, "b": 90},
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
            f"{np.mean(summary.settled):.1f} on average (of {layers}). Earliest: after "
            f"{quoted_token(labels[t_early])} ({quoted_token(final[t_early])}, from hidden state "
            f"{summary.settled[t_early]}); latest: after {quoted_token(labels[t_late])} ({quoted_token(final[t_late])}, "
            f"only from hidden state {summary.settled[t_late]}). It first reaches the top at hidden "
            f"state {np.mean(summary.first_top):.1f} on average.")
