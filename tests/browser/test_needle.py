"""The needle-in-a-haystack page in Chromium: on the real SmolLM2 the retrieval-score grid draws and the knock-out
sentence appears; the depth × length grid draws from a link (on a tiny GPT-2, whose 64 positions keep its 20 passes
short; each cell is checked against a single retrieval run in AppTest, ``tests/test_needle_page.py``, and the grid on
SmolLM2 is timed by ``python -m bench long_context``); no console error, nothing but localhost."""

from __future__ import annotations

import pytest

from tests.browser.conftest import AppPage
from tests.browser.test_bundled_lm import lm_server  # noqa: F401 (fixture: the app with the converted SmolLM2)
from tests.model_factory import build_tiny_gpt2_lm

pytestmark = pytest.mark.browser

# short enough for the tiny model's 64 positions with a 16-token haystack; the answer is in the needle
TINY_NEEDLE = {"needle": "A cat.", "question": "Who?", "answer": " cat", "length": "16"}


def test_needle_page_draws_the_retrieval_grid(browser, lm_server, tmp_path_factory):
    tab = AppPage(browser, lm_server)
    tab.patience_ms = 480_000
    try:
        page = tab.open("needle", {"model": "SmolLM2-135M-Instruct", "length": "128"})
        page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=240_000)
        page.get_by_text("Before any knock-out the answer's probability is").wait_for(timeout=240_000)
        assert page.locator(".js-plotly-plot").count() == 1
        assert page.get_by_text("the model's greedy answer is").count() == 1
        tab.assert_clean()
        # the depth × length grid from a link: 5 depths × the longest lengths the tiny model's window offers
        tiny = str(build_tiny_gpt2_lm(tmp_path_factory.mktemp("needle") / "tiny-gpt2-lm"))
        page = tab.open("needle", {"model": tiny, "grid": "true"} | TINY_NEEDLE)
        # the sentence (its figure's text alternative holds it too)
        page.get_by_text("cells measured the model ranks the expected answer first").last.wait_for(timeout=480_000)
        assert page.locator(".js-plotly-plot").count() == 2
        cells = page.locator(".js-plotly-plot").nth(1).locator(".heatmaplayer")
        assert cells.count() == 1
        tab.assert_clean()
    finally:
        tab.close()


def test_in_presentation_mode_the_retrieval_grid_and_its_heading_fit_one_slide(browser, lm_server):
    """Issue 50, item 16d: in presentation mode SmolLM2's 30-layer retrieval grid was drawn 1,872 × 1,060, so the
    page's main figure and its heading did not fit one 1080-pixel slide. Measured in a 1920 × 1080 window: from the
    top of the "Retrieval scores" heading to the bottom of its figure."""
    from tests.browser.conftest import EVERY_CHART_DRAWN

    tab = AppPage(browser, lm_server)
    tab.patience_ms = 480_000
    try:
        tab.page.set_viewport_size({"width": 1920, "height": 1080})
        page = tab.open("needle", {"model": "SmolLM2-135M-Instruct", "length": "128", "present": "true"},
                        timeout_ms=480_000)
        page.get_by_text("Before any knock-out the answer's probability is").wait_for(timeout=480_000)
        page.wait_for_function(EVERY_CHART_DRAWN, timeout=120_000)
        heading = page.locator("h2", has_text="Retrieval scores").first.bounding_box()
        chart = page.locator('[data-testid="stMain"] .js-plotly-plot').first.bounding_box()
        assert chart["y"] > heading["y"]
        assert chart["y"] + chart["height"] - heading["y"] <= 1080, (heading, chart)
        tab.assert_clean()
    finally:
        tab.close()
