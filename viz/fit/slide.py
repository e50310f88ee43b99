"""A figure fitted to a slide (presentation mode, the deck, the camera button's PNG): the font from the width, then
the width rules of ``viz.fit.width``."""

from __future__ import annotations

import plotly.graph_objects as go

from viz.fit.reading import copy_figure
from viz.fit.text import slide_font_size
from viz.fit.width import fit_legend, fit_titles, hide_cramped_cell_text, thin_ticks


def fit_for_slide(fig: go.Figure, width_px: float, export_height_px: float | None = None) -> go.Figure:
    """A copy of ``fig`` fitted to ``width_px``: font from the width, titles wrapped, ticks thinned, legend below.

    ``export_height_px``: the height the camera button saves at; ticks are thinned for the
    shorter of it and the figure's own height.
    """
    fig = copy_figure(fig)
    font_px = slide_font_size(width_px)
    fig.update_layout(font={"size": font_px}, margin={"r": max(fig.layout.margin.r or 0, 2 * font_px)})
    fit_legend(fig, width_px, font_px)
    fit_titles(fig, width_px, font_px)
    thin_ticks(fig, width_px, font_px, export_height_px)
    hide_cramped_cell_text(fig, width_px, font_px)
    return fig
