"""The Attention page on a long text in a real browser: the pooled head paints, the zoom names its tokens, a box
dragged on the pooled head moves the zoom there, a hostile token stays text, and no console error."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import AppPage, serve_app
from tests.test_long_heatmap import HOSTILE, POSITIONS, build_tiny_long_gemma3, long_text

pytestmark = pytest.mark.browser

CHART = '[data-testid="stPlotlyChart"]'
ZOOM_TITLE = re.compile(r"queries\s*(\d+)-\d+,\s*keys\s*\d+-\d+")  # the title may wrap anywhere


@pytest.fixture(scope="module")
def long_server(tmp_path_factory, browser):
    """The app with a token limit of ``POSITIONS``, and a tiny Gemma 3 that reads that many."""
    folder = build_tiny_long_gemma3(tmp_path_factory.mktemp("models") / "tiny-long-gemma3")
    with serve_app(tmp_path_factory.mktemp("server") / "streamlit.log", {"EXPLORER_MAX_TOKENS": str(POSITIONS)}) as (
            url, _proc):
        yield url, str(folder)


def _chart(page, words):
    return page.locator(CHART).filter(has=page.locator(".gtitle", has_text=words)).first


def _zoom_first_query(page) -> int:
    return int(ZOOM_TITLE.search(_chart(page, ZOOM_TITLE).locator(".gtitle").text_content()).group(1))


def test_a_long_text_is_pooled_zoomed_and_boxed(browser, long_server):
    url, folder = long_server
    tab = AppPage(browser, url)
    tab.patience_ms = 300_000
    try:
        page = tab.open("attention", {"model": folder, "text": HOSTILE + long_text(2000), "layer": "1", "head": "2"})
        pooled = _chart(page, "each pixel is the")
        pooled.locator(".imagelayer image").wait_for(timeout=300_000)
        zoomed = _chart(page, ZOOM_TITLE)
        zoomed.locator(".heatmaplayer").wait_for(timeout=300_000)
        assert _zoom_first_query(page) == 0
        ticks = zoomed.locator(".ytick text").evaluate_all("els => els.map(e => e.textContent)")
        assert ticks and all(re.search(r" \(\d+\)$", t) for t in ticks) and any(t.endswith(" (0)") for t in ticks), ticks
        assert any("<" in t for t in ticks), ticks  # the hostile text's pieces, shown as text
        assert page.locator("img[src='x']").count() == 0
        tab.wait_until_idle()
        pooled.scroll_into_view_if_needed()
        box = pooled.locator(".nsewdrag").first.bounding_box()  # the plot area, in the window
        page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.52, box["y"] + box["height"] * 0.53, steps=5)
        page.mouse.up()
        page.wait_for_function(
            """() => [...document.querySelectorAll('.gtitle')].some(t => /queries\\s*[1-9]\\d*-\\d+,\\s*keys/.test(t.textContent))""",
            timeout=120_000)
        tab.wait_until_idle()
        first = _zoom_first_query(page)
        assert 1000 < first < 2500, first  # around the middle of the text, where the box was dragged
        tab.assert_clean()
    finally:
        tab.close()
