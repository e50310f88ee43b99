"""Figures at the page's own size (outside presentation mode): margins reserved for the labels Streamlit's
chart theme draws, so a figure redrawn on every click is drawn once."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from viz.fit.reading import axes_of, category_labels, copy_figure, domain_share, legend_traces, tick_labels, write_layout
from viz.fit.text import BOLD_WIDER, LINE_HEIGHT, line_count, longest_line, text_width
from viz.fit.width import (
    COLORBAR_PX,
    COLORBAR_X,
    PAGE_AXIS_TITLE_PX,
    PAGE_FONT_PX,
    PAGE_TICK_GAP_PX,
    PAGE_TITLE_GAP_PX,
    below_plot,
    fit_legend,
    fit_titles,
    hide_cramped_cell_text,
    plot_area,
    thin_ticks,
)


def _drawn_tick_texts(fig: go.Figure, name: str) -> list[str]:
    """The tick labels an axis draws, as far as the figure fixes them (a number's width when Plotly chooses)."""
    axis = fig.layout[name]
    if axis.showticklabels is False:
        return []
    categories = category_labels(fig, name)
    if axis.tickmode == "linear" and categories and axis.dtick:
        return categories[int(axis.tick0 or 0):: int(axis.dtick)]
    found = tick_labels(fig, name)
    return found[1] if found else ["-0.00"]


def reserve_margins(fig: go.Figure, width_px: float) -> go.Figure:
    """Set a single-plot figure's margins to what its tick labels, axis titles and colour bar will take at the
    page's font sizes (estimated generously; never less than the figure asks for), so that Plotly need not push
    them out after drawing. Each push redraws the whole figure once more: 40-50 ms of the browser's main thread
    for a 128-token head. A label longer than estimated is still pushed (one redraw, as before). Mutates ``fig``.
    """
    if axes_of(fig, "x") != ["xaxis"] or axes_of(fig, "y") != ["yaxis"] or fig.layout.yaxis.scaleanchor or (
            fig.layout.showlegend is not False and len(legend_traces(fig)) > 1):
        return fig  # several plots, a legend or an aspect ratio to keep: Plotly places them as before
    margin, font = fig.layout.margin, PAGE_FONT_PX
    need: dict[str, float] = {}
    for letter, side in (("y", "l"), ("x", "b")):
        axis = fig.layout[letter + "axis"]
        if not axis.automargin:
            continue
        texts = _drawn_tick_texts(fig, letter + "axis")
        widest = max((text_width(t, font) for t in texts), default=0.0)
        lines = max((line_count(t) for t in texts), default=1)
        if letter == "y":
            reach = widest
        else:
            angle = abs(axis.tickangle or 0)
            reach = widest if angle >= 90 else (widest + font) * 0.71 if angle else LINE_HEIGHT * font * lines
            reach += axis.ticklabelstandoff or 0
        title_lines = line_count(axis.title.text)
        title = PAGE_TITLE_GAP_PX[letter] + title_lines * LINE_HEIGHT * (axis.title.font.size or PAGE_AXIS_TITLE_PX)
        need[side] = (reach + PAGE_TICK_GAP_PX[letter] if texts else 0) + (title if title_lines else 0)
    bars = [t for t in fig.data if t.type in ("heatmap", "contour") and t.showscale is not False and not t.coloraxis]
    if bars:
        bar = bars[0].colorbar
        ticks = [str(t) for t in bar.ticktext] if bar.ticktext is not None else ["0.00"]
        title = LINE_HEIGHT * (bar.title.font.size or PAGE_AXIS_TITLE_PX) + font if bar.title.text else 0
        need["r"] = (COLORBAR_PX + max(text_width(t, font) for t in ticks) + 2 * font + title
                     + COLORBAR_X * width_px)
    defaults = {"l": 80, "r": 80, "b": 80}
    write_layout(fig.layout, margin={side: max(margin[side] if margin[side] is not None else defaults[side], int(np.ceil(px)))
                               for side, px in need.items()})
    fig.__dict__["_margins_reserved"] = bool(need)  # plot_area: the margins are final (a private attribute, as fitted's)
    return fig


# Plotly's own font stack (the slides' too), not the theme's web font: a saved PNG is the SVG drawn as an image, which
# cannot load web fonts, so text laid out in the page's Source Sans was drawn wider in a fallback font and cut off.
EXPORT_FONT_FAMILY = '"Open Sans", verdana, arial, sans-serif'


def _colour_bars_apart(fig: go.Figure, width_px: float) -> None:
    """Set a colour bar that stands where Plotly puts it (x = 1.02, its background starting there) a few pixels further
    right: on a narrow figure 2 % of the plot is less than the room the plot's square cells leave it (3 px short)."""
    shift = 8 / plot_area(fig, width_px, PAGE_FONT_PX)[0]
    if fig.layout.coloraxis.colorbar.title.text is not None and fig.layout.coloraxis.colorbar.x is None:
        write_layout(fig.layout, coloraxis={"colorbar": {"x": 1.02 + shift}})
    for trace in fig.data:
        bar = getattr(trace, "colorbar", None)
        if bar is not None and trace.type in ("heatmap", "contour") and trace.showscale is not False and bar.x is None \
                and not trace.coloraxis:
            write_layout(trace, colorbar={"x": 1.02 + shift})


# Plotly's toolbar (camera, zoom, …) stands over the figure's top right corner, 2 px from the top, 26 px tall and up
# to 224 px wide (measured in Chromium, the overview's); on a touch screen it stays shown.
MODEBAR_PX, MODEBAR_WIDTH_PX = 30, 240


def _title_clear_of_modebar(fig: go.Figure, width_px: float) -> None:
    """Move the plot and its title (set just above it) down by the toolbar's height when a line of the title reaches
    under the toolbar: a title of full width was drawn under it (a phone's Attention overview)."""
    title = fig.layout.title
    if not title.text:
        return
    size = title.font.size or round(1.25 * PAGE_FONT_PX)
    if 0.01 * width_px + longest_line(title.text, size) * BOLD_WIDER > width_px - MODEBAR_WIDTH_PX:
        # the figure grows by as much, so the plot keeps its height (a shorter plot crowded its colour bar's ticks)
        write_layout(fig.layout, margin={"t": (fig.layout.margin.t if fig.layout.margin.t is not None else 100) + MODEBAR_PX},
                     height=(fig.layout.height or 450) + MODEBAR_PX)


def _height_of_square_cells(fig: go.Figure, width_px: float) -> None:
    """A single plot whose y axis keeps its scale to x (square cells, ranges fixed) and is limited by its width: Plotly
    shrinks the y domain and leaves the rest of the height empty above and below the cells (about 260 px each way for
    SmolLM2's 30 × 9 overview on a phone). The figure's height is cut to what the cells take and four title lines:
    the cells stay centred, up to two lines below the plot's top, where the last line of a long title may hang (the
    plot's width, and so the cells' height, is an estimate: a few pixels of width are tens of pixels of height)."""
    y, x = fig.layout.yaxis, fig.layout.xaxis
    if axes_of(fig, "y") != ["yaxis"] or y.scaleanchor != "x" or y.range is None or x.range is None:
        return
    area_w, _ = plot_area(fig, width_px, PAGE_FONT_PX)
    height = fig.layout.height or 450
    area_h = height - (fig.layout.margin.t or 0) - below_plot(fig, PAGE_FONT_PX, width_px)  # x labels and title push the margin
    ratio = abs(y.range[1] - y.range[0]) / max(1e-9, abs(x.range[1] - x.range[0])) * (y.scaleratio or 1)
    empty = area_h * domain_share(y) - area_w * domain_share(x) * ratio
    keep = 4 * LINE_HEIGHT * round(1.25 * PAGE_FONT_PX)  # the title's font (fit_titles)
    if empty > keep + PAGE_FONT_PX:
        write_layout(fig.layout, height=int(np.ceil(height - empty + keep)))


def fit_for_page(fig: go.Figure, width_px: float, *, reserve: bool = False) -> go.Figure:
    """A copy of ``fig`` fitted to ``width_px`` at the page's own font sizes, in ``EXPORT_FONT_FAMILY`` (outside
    presentation mode):
    titles wrapped (y titles in at most two lines, the figure taller if need be), colour bar titles along
    the bar, ticks thinned so that no two labels overlap, a legend of several entries under the plot.

    ``reserve``: also set a single plot's margins to what its labels take (``reserve_margins``: Plotly draws it
    once, not twice). Only for a figure drawn at ``width_px`` or wider: the reserved room is taken from the plot,
    where the labels of a narrower figure had their slack."""
    fig = copy_figure(fig)
    fig.__dict__["_page_theme"] = True  # plot_area: Streamlit's theme sets titles and colour bars further out
    write_layout(fig.layout, font={"family": EXPORT_FONT_FAMILY}, title={"font": {"family": EXPORT_FONT_FAMILY}})
    fit_legend(fig, width_px, PAGE_FONT_PX)
    fit_titles(fig, width_px, PAGE_FONT_PX, PAGE_AXIS_TITLE_PX, bold_title=True)
    thin_ticks(fig, width_px, PAGE_FONT_PX)
    hide_cramped_cell_text(fig, width_px, PAGE_FONT_PX)
    _colour_bars_apart(fig, width_px)
    _height_of_square_cells(fig, width_px)
    _title_clear_of_modebar(fig, width_px)
    if reserve and reserve_margins(fig, width_px).__dict__.get("_margins_reserved"):
        thin_ticks(fig, width_px, PAGE_FONT_PX)  # again, on the plotting area the reserved margins leave
        reserve_margins(fig, width_px)  # labels turned further take more room (margins only ever grow)
    return fig
