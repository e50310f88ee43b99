"""Explanations and secondary controls that fold away in presentation mode, so a figure fills the slide.

Pages call ``explain(...)`` instead of ``st.markdown`` / ``st.caption`` for the paragraphs that
explain a view, and put options a presenter rarely changes under ``controls()``.
"""

from __future__ import annotations

import streamlit as st

from ui.session import presentation_mode
from ui.view_url import VIEW_URL_CSS
from ui.viewport import PROBE_CSS

# Presentation mode keeps the page's edge small: a slide has no room to spare.
PRESENTATION_CSS = """
<style>
[data-testid="stMainBlockContainer"] { padding: 3.5rem 1.5rem 3rem 1.5rem; }
[data-testid="stMainBlockContainer"] h1 { font-size: 2rem; padding-top: 0; }
</style>
"""
PAGE_PADDING_PX = 24  # the side padding set above


def explain(markdown: str, *, caption: bool = False, label: str = "About this") -> None:
    """Explanatory text: shown as markdown (or a caption); folded into a closed expander in presentation mode."""
    if presentation_mode():
        with st.expander(label, icon=":material/info:"):
            st.markdown(markdown)
    elif caption:
        st.caption(markdown)
    else:
        st.markdown(markdown)


def controls(label: str = "Options"):
    """Where secondary controls go: the page itself, or a popover button in presentation mode.

    Use as ``left, right = controls().columns(2)`` or ``with controls(): ...``.
    """
    if presentation_mode():
        return st.popover(label, icon=":material/tune:")
    return st.container()


def beside(spec: list[float], *, gap: str = "large") -> list:
    """Text beside a figure: columns normally; in presentation mode stacked, so the figure gets the full width.
    A figure in one of the columns says so to ``show_figure`` (its ``share`` and ``column_gap``)."""
    if presentation_mode():
        return [st.container() for _ in spec]
    return st.columns(spec, gap=gap)


# Plotly announces a download ("Taking snapshot…", then "Snapshot succeeded – name.png") in boxes fixed near the
# window's top right for seconds, over the figure being saved and its toolbar, and in the screenshot a presenter
# takes next. The browser's own download indicator already says it.
PAGE_CSS = ("<style>.plotly-notifier { display: none !important; }"
            # a page link's label keeps to one line and is cut at the column's edge (Home's list on a phone): wrap it
            '[data-testid="stPageLink-NavLink"] { height: auto; } '
            '[data-testid="stPageLink-NavLink"] * { white-space: normal !important; text-overflow: clip; }'
            # a text box's character count ("17647/100000") and "Press Ctrl+Enter to apply" stand inside the box's
            # bottom edge, one 19.6-px line over its 12-px padding: the last line of a long text was drawn under them
            '[data-testid="stTextArea"] textarea { padding-bottom: 1.75rem; } '
            + PROBE_CSS + VIEW_URL_CSS + "</style>")


def page_style() -> None:
    """The app's few style rules, and smaller page padding in presentation mode (call once per run, from app.py)."""
    st.html(PAGE_CSS + (PRESENTATION_CSS if presentation_mode() else ""))
