"""Rendering a figure: toolbar download (PNG/SVG), CSV of its data, presentation styling."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from ui.deck import pin_button
from ui.explain import PAGE_PADDING_PX
from ui.session import image_format, presentation_mode
from ui.viewport import current_column, main_column
from viz.common import file_stem
from viz.deck_render import can_render, render_image
from viz.fit.page import fit_for_page
from viz.fit.slide import fit_for_slide
from viz.fit.text import export_options, page_export_options

# The width a full-page figure is drawn at on the smallest screen we fit (a 1280 × 720 projector):
# presentation mode collapses the sidebar; otherwise the open sidebar and Streamlit's padding take their share.
PRESENTATION_WIDTH = 1280 - 2 * PAGE_PADDING_PX
NORMAL_WIDTH = 820
PLOTLY_DEFAULT_HEIGHT = 450  # what Plotly (and Streamlit's chart) draws a figure without a layout height at
# The gap between neighbouring columns for each of st.columns' gap sizes (1, 2 and 4 rem)
COLUMN_GAP_PX = {"small": 16, "medium": 32, "large": 64}


def measure_main_column() -> None:
    """Mount the probe that measures the main column in the browser (``ui.viewport``); once per run, before figures."""
    main_column(PRESENTATION_WIDTH if presentation_mode() else NORMAL_WIDTH)


def columns_stacked() -> bool:
    """Whether the browser said its window is so narrow that Streamlit puts columns under each other (a phone): a
    figure of side-by-side panels is then better drawn one panel under another."""
    return current_column(NORMAL_WIDTH).stacked


def main_column_width() -> int:
    """The main column's width in CSS pixels outside presentation mode: as the browser measured it when narrower than
    ``NORMAL_WIDTH`` (a laptop with the sidebar open, a phone), else ``NORMAL_WIDTH``."""
    return current_column(NORMAL_WIDTH).width


def plotly_config(name: str, width_px: float = NORMAL_WIDTH, height_px: float | None = None) -> dict:
    """Plotly config: the camera button saves ``name``.png or .svg (as chosen in the sidebar), 1920 pixels wide.

    A slide (no ``height_px``: presentation mode, whose figures are fitted to it) is saved 16:9 at the CSS size
    nearest the figure's own width, scaled up to 1920 × 1080 pixels, so its fonts keep their size relative to the
    figure. A page's figure is saved at the size it was laid out for, ``width_px`` × ``height_px``, scaled to exactly
    1920 wide (``page_export_options``): Plotly lays a figure out again at the size it saves, and a page figure squeezed into 16:9 lost its text
    (titles over ticks, colour-bar titles over their ticks, legend entries cut). No Plotly logo and no box or lasso
    select buttons: Streamlit's frontend removes them from every chart without selections, so they are not sent.
    """
    size = export_options(width_px) if height_px is None else page_export_options(width_px, height_px)
    return {"toImageButtonOptions": {"format": image_format(), "filename": file_stem(name)} | size}


DARK_BACKGROUND = "#0e1117"  # Streamlit's dark theme's background


def fitted(fig: go.Figure, width_px: float, *, slide: bool, reserve: bool = False) -> go.Figure:
    """``fig`` restyled for a ``width_px`` column on the page or on a slide: a copy, never the caller's figure.
    ``reserve``: on the page, set its margins up front (``viz.fit.page.fit_for_page``).

    The copy is kept on ``fig`` (a private attribute; plotly allows those), so a figure from a cache is fitted
    once per width and mode, not on every rerun (fitting costs 25-50 ms of CPU per figure).
    """
    memo = fig.__dict__.setdefault("_fitted", {})
    key = (round(width_px), slide, reserve)
    if key not in memo:
        if slide:
            copy = fit_for_slide(fig, width_px, export_options(width_px)["height"])
            copy.update_layout(template="plotly_white", paper_bgcolor="white", plot_bgcolor="white")
        else:
            copy = fit_for_page(fig, width_px, reserve=reserve)
        memo[key] = copy
    return memo[key]


# Read by a screen reader, never drawn: the standard visually-hidden pattern (not display:none, which hides it from both).
VISUALLY_HIDDEN = ("position:absolute;width:1px;height:1px;margin:-1px;padding:0;border:0;overflow:hidden;"
                   "clip-path:inset(50%);white-space:nowrap")
_TAG = re.compile(r"<[^>]+>")


def _plain(text) -> str:
    """A Plotly title as plain words: its <br> a space, its other tags and surplus spaces gone."""
    return " ".join(_TAG.sub("", re.sub(r"<br\s*/?>", " ", str(text or ""), flags=re.I)).split())


def text_alternative(fig: go.Figure, sentence: str | None = None) -> str:
    """What a screen reader says for ``fig``: the page's own ``sentence`` about it, if any, then what the figure
    names itself: its title, each subplot's title, its axes and colour bar, and its kind of chart."""
    layout = fig.layout
    parts = [sentence.strip()] if sentence and sentence.strip() else []
    title = _plain(layout.title.text)
    kinds = sorted({trace.type for trace in fig.data if trace.type})
    parts.append(f"{' and '.join(kinds) or 'empty'} chart" + (f": {title}" if title else ""))
    subtitles = [_plain(a.text) for a in layout.annotations or () if a.xref == "paper" and a.yref == "paper"]
    if 1 < len(subtitles) <= 12:
        parts.append("panels: " + "; ".join(t for t in subtitles if t))
    for name in sorted(k for k in layout.to_plotly_json() if re.fullmatch(r"[xy]axis\d*", k)):
        axis_title = _plain(layout[name].title.text)
        if axis_title:
            parts.append(f"{'horizontal' if name[0] == 'x' else 'vertical'} axis: {axis_title}")
    bars = [_plain(t.colorbar.title.text) for t in fig.data if getattr(t, "colorbar", None) is not None]
    if any(bars):
        parts.append("colour: " + next(b for b in bars if b))
    return ". ".join(p[0].upper() + p[1:].rstrip(".") for p in parts if p) + "."


def csv_download(label: str, data: pd.DataFrame | Callable[[], pd.DataFrame], *, file_name: str, key: str | None) -> None:
    """A download button for ``data`` as CSV, built only when the user clicks it (never on a rerun).

    ``data``: a table, or a function returning one (so the table itself is not built either).
    """
    table = data if callable(data) else (lambda: data)
    st.download_button(
        label,
        lambda: table().to_csv(index=False).encode("utf-8"),
        file_name=file_name,
        mime="text/csv",
        on_click="ignore",
        key=key,
        icon=":material/download:",
    )


def show_figure(
    fig: go.Figure, *, name: str, data: pd.DataFrame | Callable[[], pd.DataFrame] | None = None, key: str | None = None,
    width: str | int = "stretch", share: float = 1.0, reserve_margins: bool = False, alt: str | None = None,
    column_gap: str = "small", on_select: str = "ignore", selection_mode: str = "points", dark: bool = False,
):
    """Draw ``fig``; offer ``data`` (a table, or a function building it) as CSV under it, serialised only when
    clicked. ``name`` becomes the download file name. ``width``: ``"stretch"`` (the column's width) or
    ``"content"`` (the figure's own layout width). ``share``: the fraction of the page's width the figure's
    column takes (0.5 in one of two columns); presentation mode fits fonts, titles and tick labels to that width.
    ``reserve_margins``: a figure redrawn on every click, whose ``share`` is exact, gets the margins its labels take
    up front, so the browser draws it once (``viz.fit.page.reserve_margins``). ``alt``: the page's sentence about the
    figure, read by a screen reader before what the figure names itself (``text_alternative``). ``column_gap``: the
    ``gap`` of the columns the figure is in. In a window narrower than the width assumed, figures are fitted to the
    main column the browser measured (``ui.viewport``), and to all of it where Streamlit stacks its columns.
    ``on_select="rerun"``: a click on a point reruns the page; returns the chart's event (its ``selection.points``);
    ``selection_mode="box"``: a box dragged on the plot does (its ``selection.box``). ``dark``: drawn on a dark
    background, in presentation mode too (a projector in a dim room).
    """
    slide = presentation_mode()
    # Fitted for the smaller of the width assumed and the main column the browser measured (a narrow window).
    column = current_column(PRESENTATION_WIDTH if slide else NORMAL_WIDTH)
    width_px = column.figure_width(share, COLUMN_GAP_PX[column_gap])
    theme = None if slide or dark else "streamlit"
    fig_in = fig  # the view's own figure: the one a pin keeps
    fig = fitted(fig, width_px, slide=slide, reserve=reserve_margins)
    if dark:
        fig = go.Figure(fig).update_layout(template="plotly_dark", paper_bgcolor=DARK_BACKGROUND,
                                           plot_bgcolor=DARK_BACKGROUND)
    # The figure's text alternative just before it, in one gapless container with it, so it is read with the chart
    # and takes no space on the page (WCAG 1.1.1).
    with st.container(gap=None):
        st.html(f'<p class="figure-alt" data-main-column="{column}" style="{VISUALLY_HIDDEN}">Figure: {html.escape(text_alternative(fig, alt))}</p>')
        height = None if slide else fig.layout.height or PLOTLY_DEFAULT_HEIGHT
        selecting = {} if on_select == "ignore" else {"on_select": on_select, "selection_mode": selection_mode}
        event = st.plotly_chart(fig, theme=theme, config=plotly_config(name, width_px, height), key=key, width=width, **selecting)
    with st.container(horizontal=True, gap="small"):  # the figure's downloads, and "Pin to deck" beside them
        if data is not None:
            csv_download("Download data (CSV)", data, file_name=f"{file_stem(name)}.csv", key=None if key is None else f"{key}-csv")
        pin_button(fig_in, name=name, alt=alt, data=data, key=key)
    return event


def clicked_point(chart_key: str, convert: Callable = lambda data: data):
    """``convert`` of the ``customdata`` of the point last clicked on the chart ``chart_key`` (drawn with
    ``on_select="rerun"``), once per click: None when nothing new was clicked since the last call."""
    event = st.session_state.get(chart_key)
    try:
        points = event["selection"]["points"] if event else []
    except (KeyError, TypeError):
        points = []
    data = convert(points[0].get("customdata")) if points else None
    handled = f"{chart_key}.handled"
    if data == st.session_state.get(handled):
        return None
    st.session_state[handled] = data
    return data


IMAGE_TYPES = {"png": "image/png", "svg": "image/svg+xml"}


def figure_downloads(build: Callable[[], go.Figure], *, name: str, data: Callable[[], pd.DataFrame], key: str,
                     alt: str | None = None, reserve_margins: bool = False) -> None:
    """What ``show_figure`` offers under a figure, for a figure the page does not draw (another control shows its
    numbers, as the Attention page's head switch does): the image in the format chosen in the sidebar, drawn on the
    server by the slides' Chromium (``viz.deck_render``) at the size the camera button would save, the data as CSV,
    and "Pin to deck"; ``build`` is called only when one of them is clicked."""
    slide = presentation_mode()
    width_px = current_column(PRESENTATION_WIDTH if slide else NORMAL_WIDTH).figure_width(1.0, COLUMN_GAP_PX["small"])
    kind = image_format()

    def image() -> bytes:
        fig = fitted(build(), width_px, slide=slide, reserve=reserve_margins)
        size = export_options(width_px) if slide else page_export_options(width_px, fig.layout.height or PLOTLY_DEFAULT_HEIGHT)
        fig = go.Figure(fig).update_layout(template="plotly_white", paper_bgcolor="white", plot_bgcolor="white")
        return render_image(fig, {"format": kind, **size})

    with st.container(horizontal=True, gap="small"):
        if can_render():
            st.download_button(f"Download image ({kind.upper()})", image, file_name=f"{file_stem(name)}.{kind}",
                               mime=IMAGE_TYPES[kind], on_click="ignore", key=f"{key}-image", icon=":material/image:",
                               help="The figure drawn on the server when clicked, at the size its camera button would "
                                    "save it")
        else:  # the click would only say "Failed to generate file for download"
            st.caption("No image download here: this server has no Chromium to draw it (Debian's chromium "
                       "package); its data downloads as CSV.")
        csv_download("Download data (CSV)", data, file_name=f"{file_stem(name)}.csv", key=f"{key}-csv")
        pin_button(build, name=name, alt=alt, data=data, key=key)
