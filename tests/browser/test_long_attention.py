"""The Attention page on a long text in a real browser: the pooled head paints, the zoom names its tokens, a box
dragged on the pooled head moves the zoom there, a hostile token stays text, and no console error."""

from __future__ import annotations

import base64
import io
import re

import numpy as np
import pytest
from PIL import Image

from tests.browser.conftest import AppPage, serve_app, title_words
from tests.test_long_heatmap import HOSTILE, POSITIONS, build_tiny_long_gemma3, long_text

pytestmark = pytest.mark.browser

DPR = 2
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
    """The first figure whose title has ``words`` (a string, wherever the title wraps, or a pattern)."""
    return page.locator(CHART).filter(has=page.locator(".gtitle", has_text=title_words(words) if isinstance(words, str) else words)).first


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


def test_the_pooled_head_is_drawn_pixel_for_pixel_at_twice_the_pixels(browser, long_server):
    """On a screen of device pixel ratio 2, the pooled head's image has exactly twice its drawn CSS width in pixels,
    and the screen's pixels are the image's: its first key column (token 0, where a sink would be) row by row, and
    every pixel away from the zoom's outline; the sentence from the head's numbers is under it."""
    url, folder = long_server
    tab = AppPage(browser, url, device_scale_factor=DPR)
    tab.patience_ms = 300_000
    try:
        page = tab.open("attention", {"model": folder, "text": long_text(2000), "layer": "1", "head": "2",
                                      "q0": "1500", "k0": "1500"})
        pooled = _chart(page, "at 2×")  # pooled again for the pixel ratio the probe reported
        image = pooled.locator(".imagelayer image")
        image.wait_for(timeout=300_000)
        tab.wait_until_idle()
        image.scroll_into_view_if_needed()
        href = image.get_attribute("href")
        png = np.asarray(Image.open(io.BytesIO(base64.b64decode(href.split(",", 1)[1]))).convert("RGB")).astype(int)
        box = image.bounding_box()
        assert png.shape[1] == round(box["width"] * DPR) and png.shape[0] == round(box["height"] * DPR), (png.shape, box)
        page.mouse.move(0, 0)  # no hover label over the plot
        around = {"x": box["x"] - 2, "y": box["y"] - 2, "width": box["width"] + 4, "height": box["height"] + 4}
        shot = page.screenshot(clip=around, scale="device", animations="disabled")  # the image and 4 pixels around
        screen = np.asarray(Image.open(io.BytesIO(shot)).convert("RGB")).astype(int)
        height, width = png.shape[:2]
        outline = int(height * 1500 / 4096) - 4  # the zoom's outline (queries and keys 1500-1563; < 4,096 tokens) lies past this
        # where the image's first pixel landed: the bounding box is in CSS pixels, possibly at a half device pixel
        dy, dx = min(((y, x) for y in range(9) for x in range(9)), key=lambda at: np.abs(
            screen[at[0] : at[0] + outline, at[1] : at[1] + outline] - png[:outline, :outline]).sum())
        drawn = screen[dy : dy + height, dx : dx + width]
        np.testing.assert_array_equal(drawn[:, 0], png[:, 0])  # token 0's column, every pixel row
        np.testing.assert_array_equal(drawn[:outline, :outline], png[:outline, :outline])  # nothing resampled
        sentences = page.get_by_text(re.compile("On average this head puts|the strongest weight here")).filter(visible=True)
        texts = [t for t in sentences.all_text_contents() if not t.startswith("Figure:")]  # the figure's alt text aside
        assert len(texts) == 2 and texts[0].startswith("Layer 1, head 2: On average this head puts"), texts
        assert re.match(r"Queries 1,500–1,563 put on average \d+% of their attention on keys 1,500–1,563", texts[1]), texts
        tab.assert_clean()
    finally:
        tab.close()
