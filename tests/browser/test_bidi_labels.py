"""Right-to-left tokens keep the app's left-to-right label order when Chromium draws them (issue 28: "##2·ل").

Plotly draws tick labels, legends and titles as SVG text; the browser's bidirectional algorithm decides where
each character lands. The test draws labels as ``viz.common.plotly_safe`` writes them and reads back where each
character was placed.
"""

from __future__ import annotations

import html

import pytest

from viz.common import plotly_safe

pytestmark = pytest.mark.browser

PAGE = """<svg xmlns="http://www.w3.org/2000/svg" width="800" height="200">
<text id="label" x="10" y="50" font-size="24" font-family="sans-serif"></text></svg>"""
PLACE = """(text) => { const t = document.getElementById('label'); t.textContent = text;
    return [...text].map((_, i) => t.getStartPositionOfChar(i).x); }"""


def _x_positions(page, text: str) -> dict[str, float]:
    """Where each visible character of ``text`` starts, left to right on screen (one character per key)."""
    xs = page.evaluate(PLACE, text)
    return {c: x for c, x in zip(text, xs) if c not in "\u2068\u2069"}


@pytest.mark.parametrize(("label", "before", "after"), [
    ("ل·2", "ل", "2"),       # a repeated Arabic token, made unique by its position
    ("##ل·2", "ل", "2"),     # the same token continuing a word: the "##2·ل"
    ("ש·7", "ש", "7"),       # Hebrew
])
def test_right_to_left_tokens_keep_their_prefix_and_position_in_place(browser, label, before, after):
    page = browser.new_page()
    try:
        page.set_content(PAGE)
        drawn = _x_positions(page, html.unescape(plotly_safe(label)))
        assert drawn[before] < drawn[after], f"{label!r} is drawn out of order: {drawn}"
        raw = _x_positions(page, label)  # the control: without isolation the browser reorders it
        assert raw[before] > raw[after], f"{label!r} was not reordered without isolation, so the test shows nothing"
    finally:
        page.close()
