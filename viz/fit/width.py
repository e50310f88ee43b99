"""The rules that fit a figure to the width it is drawn at, on a slide (``viz.fit.slide``) and on the page
(``viz.fit.page``) alike: tick labels thinned, titles, axis titles and legends wrapped or moved, numbers in cells too
small to read hidden, so that nothing overlaps or leaves the figure."""

from __future__ import annotations

from numbers import Real

import numpy as np
import plotly.graph_objects as go

from viz.fit.reading import (
    axes_of,
    category_labels,
    domain_share,
    legend_height_px,
    legend_traces,
    numbered_in_order,
    plain_array,
    tick_labels,
    write_layout,
)
from viz.fit.text import (
    AXIS_TITLE_LINES,
    BOLD_WIDER,
    LINE_BREAK,
    LINE_HEIGHT,
    SMALL_LINE,
    TAG,
    TICK_PITCH,
    line_count,
    longest_line,
    text_width,
    wrap_text,
)

# Streamlit's chart theme sets an axis title this far from its tick labels (y: spacing twoXL, x: xl), and Plotly puts
# tick labels about this far from the plot (tick mark and padding; measured in Chromium, rounded up).
PAGE_TITLE_GAP_PX = {"y": 32, "x": 24}
PAGE_TICK_GAP_PX = {"y": 14, "x": 20}
# A colour bar: Plotly's default thickness and padding; it stands at x = 1.02, 2 % of the plotting width past the plot
# (counted as 2.5 % of the assumed width: a page figure is often drawn a little wider than assumed).
COLORBAR_PX, COLORBAR_X = 40, 0.025


def _right_extra(fig: go.Figure, font_px: float) -> float:
    """Room a colour bar or a vertical legend on the right takes (Plotly pushes the margin by it)."""
    extra = 0.0
    has_bar = any(getattr(t, "showscale", None) is not False and t.type in ("heatmap", "contour") for t in fig.data)
    if has_bar or fig.layout.coloraxis.colorbar.title.text is not None:
        extra += 40 + 3 * font_px
    legend = fig.layout.legend
    if fig.layout.showlegend is not False and legend.orientation != "h" and len(legend_traces(fig)) > 1:
        extra += max((text_width(str(t.name), font_px) for t in legend_traces(fig)), default=0) + 50
    return extra


def plot_area(fig: go.Figure, width_px: float, font_px: float, *, page: bool | None = None) -> tuple[float, float]:
    """Estimated ``(width, height)`` in px of the plotting area of the whole figure (all subplots' span). ``page``:
    drawn on the page in Streamlit's theme (default: as ``viz.fit.page.fit_for_page`` marked the figure)."""
    margin = fig.layout.margin
    page = fig.__dict__.get("_page_theme", False) if page is None else page
    left = max(margin.l if margin.l is not None else 80, 0)
    for name in axes_of(fig, "y"):
        labels = tick_labels(fig, name)
        widest = max((text_width(t, font_px) for t in labels[1]), default=0) if labels else 3 * font_px
        lines = line_count(fig.layout[name].title.text)
        if page:
            title = lines * LINE_HEIGHT * PAGE_AXIS_TITLE_PX + PAGE_TITLE_GAP_PX["y"] if lines else 0
            left = max(left, widest + title + PAGE_TICK_GAP_PX["y"])
        else:
            left = max(left, widest + lines * LINE_HEIGHT * font_px + 12)
        break
    # margins set by reserve_margins already hold the colour bar and the labels: Plotly draws them as they are
    reserved = fig.__dict__.get("_margins_reserved", False)
    extra = _right_extra(fig, font_px)
    if page and extra:  # the theme's colour bar: thicker, its title along it, set 2.5 % of the plot past it
        extra += COLORBAR_X * width_px + font_px
    right = (margin.r if margin.r is not None else 80) + (0 if reserved else extra)
    top = margin.t if margin.t is not None else 100
    bottom = margin.b if margin.b is not None else 80
    height = fig.layout.height or 450
    return max(60.0, width_px - left - right), max(60.0, height - top - bottom)


def thin_ticks(fig: go.Figure, width_px: float, font_px: float, height_px: float | None = None) -> go.Figure:
    """Label every k-th tick, and turn x labels, so that neighbouring labels never overlap.

    For each axis whose labels the figure fixes (token lists, categories, a fixed ``dtick``):
    x labels stay flat when they fit, else turn 45° or 90° and keep every k-th label so that
    their pitch across the text is at least ``TICK_PITCH`` font sizes; y labels keep every k-th.
    The hover still names every cell. ``height_px`` caps the height used (a 16:9 export is
    shorter than a tall figure). Mutates and returns ``fig``.
    """
    area_w, area_h = plot_area(fig, width_px, font_px)
    if height_px is not None:
        area_h = min(area_h, area_h - ((fig.layout.height or 450) - height_px))
    margin_b = fig.layout.margin.b if fig.layout.margin.b is not None else 80
    below = 0.0  # how far the x labels and title reach under the plot
    for name in axes_of(fig, "x") + axes_of(fig, "y"):
        found = tick_labels(fig, name)
        axis = fig.layout[name]
        if name[0] == "y" and below > margin_b:
            area_h, margin_b = area_h - (below - margin_b), below
        if not found:
            if name[0] == "x" and axis.side == "top" and axis.showticklabels is not False:  # numbers, one line
                _clear_title_of_top_labels(fig, axis, LINE_HEIGHT * font_px, font_px)
            continue
        values, texts, units = found
        label_px = axis.tickfont.size or font_px  # an axis may draw its labels at a size of its own
        length = (area_w if name[0] == "x" else max(40.0, area_h)) * domain_share(axis)
        numeric = len(values) > 1 and all(isinstance(v, Real) for v in values[:2])
        pitch = max(1e-6, length / units * (values[1] - values[0] if numeric else 1))
        widest = max((text_width(t, label_px) for t in texts), default=0.0)
        across = TICK_PITCH * label_px
        wrapped = None
        if name[0] == "x" and widest + label_px > pitch and len(texts) <= 6:
            wrapped = [wrap_text(t, pitch - label_px, label_px) for t in texts]
            fits = all(text_width(line, label_px) + label_px <= pitch for t in wrapped for line in LINE_BREAK.split(t))
            wrapped = wrapped if fits and max(line_count(t) for t in wrapped) <= 3 else None
        if name[0] == "x" and wrapped is not None:
            angle, step, texts = 0, 1, wrapped
        elif name[0] == "x" and widest + label_px <= pitch:
            angle, step = (0 if axis.tickangle is None else axis.tickangle), 1
        elif name[0] == "x":
            step45 = int(np.ceil(across / (pitch * np.sin(np.pi / 4))))
            angle, step = (-45, 1) if step45 == 1 else (-90, int(np.ceil(across / pitch)))
        else:
            angle, step = None, int(np.ceil(across / pitch))
        # a turned x label leans into the corner where the y axis's bottom label sits: set it off the plot
        standoff = round(label_px / 2) if name[0] == "x" and angle in (-45, -90) else 0
        if name[0] == "x":
            reach = {0: LINE_HEIGHT * label_px * max(line_count(t) for t in texts), -45: widest * 0.72 + label_px}
            title = line_count(axis.title.text) * LINE_HEIGHT * font_px
            below = max(below, reach.get(angle, widest + label_px) + standoff + title + 10)
            if axis.side == "top":
                _clear_title_of_top_labels(fig, axis, reach.get(angle, widest + label_px) + standoff, font_px)
        changes: dict = {"automargin": True}
        if angle is not None:
            changes["tickangle"] = angle
        if standoff:
            changes["ticklabelstandoff"] = standoff
        categories = category_labels(fig, name)
        if axis.dtick is not None and axis.tickmode != "array" and categories is None:
            changes["dtick"] = axis.dtick * step
        elif wrapped is None and numbered_in_order(axis, categories) and texts == categories:
            # Every step-th category as Plotly numbers them (0, 1, … in order): the same labels, without sending
            # the list twice more (a 128-token head's labels were a fifth of its layout's bytes)
            changes |= {"tickmode": "linear", "tick0": 0, "dtick": step}
        elif step > 1 or wrapped is not None or axis.type == "category" or categories:
            changes |= {"tickmode": "array", "tickvals": values[::step], "ticktext": texts[::step]}
        write_layout(fig.layout, **{name: changes})
    return fig


def _title_hanging_px(text: str, title_px: float) -> int:
    """How far the extra lines of a title of several lines reach below where one line would stand. Where Plotly sets
    them depends on the title (measured in Chromium: a bold title's second line hung below the pad, over the plot; a
    plain title of three lines stood half a line higher), so this counts all of them (a small line as 0.75)."""
    small = sum(1 for line in LINE_BREAK.split(text) if SMALL_LINE.match(line))
    return int(round(LINE_HEIGHT * title_px * (line_count(text) - 1 - small * 0.25)))


def _clear_title_of_top_labels(fig: go.Figure, axis, labels_px: float, font_px: float) -> None:
    """Set the title (``fit_titles`` put it just above the plot) clear of an x ``axis`` drawn on top: its tick labels
    reach ``labels_px`` above the plot (turned when the figure is narrow), its title past them. The top margin grows by
    as much."""
    title = fig.layout.title
    if not title.text:
        return
    lines = line_count(axis.title.text)
    axis_title = lines * LINE_HEIGHT * (axis.title.font.size or font_px) + PAGE_TITLE_GAP_PX["x"] if lines else 0
    pad = title.pad.b or 0
    needed = int(np.ceil(labels_px + axis_title + 6 + _top_annotations_px(fig, font_px)
                         + _title_hanging_px(title.text, title.font.size or font_px)))
    if needed > pad:
        write_layout(fig.layout, title={"pad": {"b": needed}}, margin={"t": (fig.layout.margin.t or 0) + needed - pad})


MIN_CELL_TEXT_PX = 9  # in-cell numbers smaller than this are noise: the hover still gives each cell's value


def hide_cramped_cell_text(fig: go.Figure, width_px: float, font_px: float) -> go.Figure:
    """Drop the numbers written in a heatmap's cells when its cells, at ``width_px``, are too small to hold them at
    ``MIN_CELL_TEXT_PX`` (Plotly shrinks in-cell text to fit: 3-pixel digits on a phone). Mutates and returns ``fig``."""
    area_w, area_h = plot_area(fig, width_px, font_px)
    for trace in fig.data:
        if trace.type != "heatmap" or not trace.texttemplate or trace.z is None:
            continue
        z = plain_array(trace.z)
        if z.ndim != 2 or not z.size:
            continue
        x_axis = fig.layout["xaxis" + (trace.xaxis or "x")[1:]]
        y_axis = fig.layout["yaxis" + (trace.yaxis or "y")[1:]]
        cell_w = area_w * domain_share(x_axis) / z.shape[1]
        cell_h = max(40.0, area_h) * domain_share(y_axis) / z.shape[0]
        if y_axis.scaleanchor or x_axis.scaleanchor:  # square cells: the smaller side sets both
            cell_w = cell_h = min(cell_w, cell_h)
        texts = [str(t) for t in np.asarray(trace.text, dtype=object).ravel()[:2000]] if trace.text is not None else []
        widest = max((text_width(t, MIN_CELL_TEXT_PX) for t in texts), default=text_width("0.00", MIN_CELL_TEXT_PX))
        if cell_w < widest + 2 or cell_h < LINE_HEIGHT * MIN_CELL_TEXT_PX:
            trace.texttemplate = None
    return fig


def _subplot_width(fig: go.Figure, annotation, area_w: float) -> float:
    """Width a subplot title may take: its x axis's domain, or the whole plotting area."""
    xref = annotation.xref or "paper"
    if xref.endswith(" domain"):
        name = "xaxis" + xref.split(" ")[0][1:]
        return area_w * domain_share(fig.layout[name])
    columns = len({tuple(fig.layout[n].domain or (0, 1)) for n in axes_of(fig, "x")}) or 1
    return area_w / columns


def _top_annotations_px(fig: go.Figure, font_px: float) -> float:
    """Height of the text set on top of the plot (subplot titles: no arrow, at the top of the paper or of a domain)."""
    tallest = 0.0
    for annotation in fig.layout.annotations:
        ref = str(annotation.yref or "paper")
        on_top = (ref == "paper" or ref.endswith(" domain")) and annotation.y is not None and annotation.y >= 0.99
        if annotation.text and annotation.showarrow is False and on_top and annotation.yanchor in (None, "auto", "bottom"):
            tallest = max(tallest, line_count(annotation.text) * LINE_HEIGHT * (annotation.font.size or font_px))
    return tallest


def fit_titles(fig: go.Figure, width_px: float, font_px: float, axis_title_px: float | None = None, *,
               bold_title: bool = False) -> go.Figure:
    """Wrap the title, subplot titles, axis titles and legend names to the space they have.

    The title is set left in the figure and the top margin grows to hold its lines; y titles take at
    most two lines (see ``fit_y_titles``). ``axis_title_px``: axis titles' size when an axis does not
    set one (default ``font_px``). ``bold_title``: the title will be drawn bold (Streamlit's theme bolds it on the
    page), so it is wrapped to the width of bold glyphs. Mutates and returns ``fig``.
    """
    area_w, area_h = plot_area(fig, width_px, font_px)
    for annotation in fig.layout.annotations:
        if annotation.text:
            size = annotation.font.size or font_px
            room = _subplot_width(fig, annotation, area_w) if annotation.showarrow is False else area_w * 0.8
            longest = max((text_width(word, 1.0) for word in TAG.sub(" ", annotation.text).split()), default=0.0)
            if longest * size > room - 8:  # a word wider than its room (narrow panels): a smaller font, down to 9 px
                size = max(MIN_CELL_TEXT_PX, int((room - 8) / longest))
                annotation.font.size = size
            annotation.text = wrap_text(annotation.text, room - 8, size)
            if annotation.x is not None and annotation.x >= 1 and str(annotation.xref or "").endswith("domain"):
                annotation.xanchor = "right"  # a note at the right edge grows leftwards, into the figure
    title_px = round(font_px * 1.25)
    title = fig.layout.title.text
    if title:
        wrapped = wrap_text(title, (width_px - 30) / (BOLD_WIDER if bold_title else 1.0), title_px)
        # The title sits just above the plot, clear of the top tick label (which reaches about half a
        # font size above the plot) and of any subplot titles set on the plot's top edge.
        pad = int(round(0.9 * font_px) + 4 + _top_annotations_px(fig, font_px))
        small = sum(1 for line in LINE_BREAK.split(wrapped) if SMALL_LINE.match(line))
        # lift the title by its extra lines, which may hang over the plot, and give the top margin half as much again
        hanging = _title_hanging_px(wrapped, title_px)
        # automargin: Plotly grows the top margin until every line of the title is inside the figure
        write_layout(fig.layout, title={"text": wrapped, "x": 0.01, "xanchor": "left", "xref": "container", "yref": "paper",
                                        "y": 1, "yanchor": "bottom",
                                  "automargin": True, "pad": {"b": pad + hanging}, "font": {"size": title_px}})
        needed = (6 + pad + LINE_HEIGHT * title_px * (line_count(wrapped) - small * 0.25) + LINE_HEIGHT * font_px
                  + hanging / 2)
        write_layout(fig.layout, margin={"t": max(fig.layout.margin.t or 0, int(needed))})
    elif _top_annotations_px(fig, font_px):
        # no title: the top margin still holds the subplot titles' lines, which now may be several
        needed = _top_annotations_px(fig, font_px) + round(0.5 * font_px) + 4
        write_layout(fig.layout, margin={"t": max(fig.layout.margin.t if fig.layout.margin.t is not None else 100, int(needed))})
    for name in axes_of(fig, "x"):
        axis = fig.layout[name]
        if axis.title.text:
            size = axis.title.font.size or axis_title_px or font_px
            text = wrap_text(axis.title.text, area_w * domain_share(axis) - 8, size)
            write_layout(fig.layout, **{name: {"title": {"text": text, "font": {"size": size}}, "automargin": True}})
    fit_y_titles(fig, width_px, font_px, axis_title_px)
    # a colour bar's title runs along the bar, where Plotly reserves room for it
    colorbar = fig.layout.coloraxis.colorbar
    if colorbar.title.text:
        text = wrap_text(colorbar.title.text, 12 * font_px, font_px)
        write_layout(fig.layout, coloraxis={"colorbar": {"title": {"text": text, "side": "right"}}})
    for trace in fig.data:
        bar = getattr(trace, "colorbar", None)
        if bar is not None and bar.title.text:
            write_layout(trace, colorbar={"title": {"text": wrap_text(bar.title.text, 12 * font_px, font_px), "side": "right"}})
    return fig


def below_plot(fig: go.Figure, font_px: float, width_px: float | None = None) -> float:
    """Estimated room under the plotting area: x tick labels (turned 45° when they do not fit flat), x title, a legend
    below (in as many rows as it takes at ``width_px``; one row without it)."""
    below = float(fig.layout.margin.b if fig.layout.margin.b is not None else 80)
    for name in axes_of(fig, "x"):
        axis = fig.layout[name]
        found = tick_labels(fig, name)
        texts = found[1] if found else ["0.00"]
        widest = max((text_width(t, font_px) for t in texts), default=0.0)
        lines = max((line_count(t) for t in texts), default=1)
        reach = LINE_HEIGHT * font_px * lines if axis.tickangle in (None, 0) and found is None else widest * 0.72 + font_px
        title = line_count(axis.title.text) * LINE_HEIGHT * (axis.title.font.size or font_px)
        below = max(below, reach + title + 16)
    legend = fig.layout.legend
    if legend.orientation == "h" and fig.layout.showlegend is not False and len(legend_traces(fig)) > 1:
        room = None if width_px is None else plot_area(fig, width_px, font_px)[0]
        below += legend_height_px(fig, room, font_px)
    return below


def span_px(fig: go.Figure, name: str, area_w: float, area_h: float) -> float:
    """Drawn height of y axis ``name``: its domain's share of the plotting height, or less when the axis keeps
    its scale equal to an x axis (``scaleanchor``) and the width is what limits it."""
    axis = fig.layout[name]
    span = area_h * domain_share(axis)
    anchor = axis.scaleanchor
    if anchor and anchor.startswith("x") and axis.range is not None:
        x = fig.layout["xaxis" + anchor[1:]]
        if x.range is not None:
            ratio = abs(axis.range[1] - axis.range[0]) / max(1e-9, abs(x.range[1] - x.range[0])) * (axis.scaleratio or 1)
            span = min(span, area_w * domain_share(x) * ratio)
    return span


def fit_y_titles(fig: go.Figure, width_px: float, font_px: float, axis_title_px: float | None = None) -> go.Figure:
    """Wrap each y axis title to the height its axis is drawn at, in at most ``AXIS_TITLE_LINES`` lines.

    A y title runs along its axis and is centred on it, so one longer than the axis reaches into the
    figure's title or under the x labels. When it would need more lines, the figure grows taller (an
    axis whose scale is tied to its x axis cannot: its title wraps to the height it has). Mutates and
    returns ``fig``.
    """
    names = [n for n in axes_of(fig, "y") if fig.layout[n].title.text]
    if not names:
        return fig
    height = fig.layout.height or 450
    top = fig.layout.margin.t if fig.layout.margin.t is not None else 100
    area_w, _ = plot_area(fig, width_px, font_px)
    area_h = max(60.0, height - top - below_plot(fig, font_px, width_px))
    grow = 0.0
    for name in names:
        axis = fig.layout[name]
        size = axis.title.font.size or axis_title_px or font_px
        text = LINE_BREAK.sub(" ", axis.title.text)
        # the estimate of text widths is rough, so a title keeps a margin of one font size plus 10 % at both ends
        room = 0.9 * span_px(fig, name, area_w, area_h) - 2 * size
        wrapped = wrap_text(text, room, size)
        if axis.scaleanchor and (line_count(wrapped) > 2 * AXIS_TITLE_LINES or longest_line(wrapped, size) > room):
            # square cells leave the axis shorter than a word of its title (a grid on a phone): readable beats square
            write_layout(fig.layout, **{name: {"scaleanchor": False}})
        if not axis.scaleanchor and (line_count(wrapped) > AXIS_TITLE_LINES or longest_line(wrapped, size) > room):
            room = max(text_width(text, size) / AXIS_TITLE_LINES, max(text_width(w, size) for w in text.split(" ")))
            while line_count(wrap_text(text, room, size)) > AXIS_TITLE_LINES:
                room += size
            wrapped = wrap_text(text, room, size)
            grow = max(grow, (longest_line(wrapped, size) + 2 * size) / 0.9 / domain_share(axis) - area_h)
        write_layout(fig.layout, **{name: {"title": {"text": wrapped, "font": {"size": size}}, "automargin": True}})
    if grow > 0:
        write_layout(fig.layout, height=int(height + np.ceil(grow)))
    return fig


def fit_legend(fig: go.Figure, width_px: float, font_px: float) -> go.Figure:
    """A legend of several entries goes under the plot, across the figure, its names wrapped to fit, its title above
    its rows when they take more than one; the figure grows by the rows past the first, so that the plot keeps its
    height.

    Below the x axis (pushing the bottom margin) it never covers data. Mutates and returns ``fig``.
    """
    shown = legend_traces(fig)
    if fig.layout.showlegend is False or (len(shown) < 2 and fig.layout.showlegend is not True):
        return fig
    for trace in shown:
        trace.name = wrap_text(trace.name, width_px - 80, font_px)
    fig.layout.legend.update(orientation="h", x=0, xanchor="left", xref="container", y=0, yanchor="bottom",
                             yref="container", font={"size": font_px})
    room = plot_area(fig, width_px, font_px)[0]
    title = fig.layout.legend.title
    if title.text and not str(title.side or "").startswith("top") \
            and legend_height_px(fig, room, font_px) > legend_height_px(fig, None, font_px):
        # Plotly wraps a horizontal legend's rows at the plot's width but sets them right of a title on their left
        # (plotly.js legend/draw.js, computeLegendDimensions): the rows ran past the figure's right edge by the title's
        # width ("head 4" at 1223-1292 px of a 1232-px slide). Above its rows the title shifts nothing.
        write_layout(fig.layout, legend={"title": {"side": "top"}})
    extra = legend_height_px(fig, room, font_px) - legend_height_px(fig, None, font_px)
    if extra > 0:
        write_layout(fig.layout, height=int(np.ceil((fig.layout.height or 450) + extra)))
    return fig


PAGE_FONT_PX, PAGE_AXIS_TITLE_PX = 12, 14  # Streamlit's chart theme: tick labels and legend 12 px, axis titles 14 px
