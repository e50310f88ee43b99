"""The needle-in-a-haystack page on the real SmolLM2 in Chromium: the retrieval-score grid draws, the knock-out
sentence appears, the depth × length grid draws from a link, no console error, nothing but localhost."""

from __future__ import annotations

import pytest

from tests.browser.conftest import AppPage
from tests.browser.test_bundled_lm import lm_server  # noqa: F401 (fixture: the app with the converted SmolLM2)

pytestmark = pytest.mark.browser


def test_needle_page_draws_the_retrieval_grid(browser, lm_server):
    tab = AppPage(browser, lm_server)
    tab.patience_ms = 480_000
    try:
        page = tab.open("needle", {"model": "SmolLM2-135M-Instruct", "length": "128"})
        page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=240_000)
        page.get_by_text("Before any knock-out the answer's probability is").wait_for(timeout=240_000)
        assert page.locator(".js-plotly-plot").count() == 1
        assert page.get_by_text("the model's greedy answer is").count() == 1
        tab.assert_clean()
        # the depth × length grid from a link: 5 depths × the 4 longest lengths this server's 512-token limit offers
        page = tab.open("needle", {"model": "SmolLM2-135M-Instruct", "length": "128", "grid": "true"})
        # the sentence (its figure's text alternative holds it too): 20 passes of the model
        page.get_by_text("cells measured the model ranks the expected answer first").last.wait_for(timeout=480_000)
        assert page.locator(".js-plotly-plot").count() == 2
        cells = page.locator(".js-plotly-plot").nth(1).locator(".heatmaplayer")
        assert cells.count() == 1
        tab.assert_clean()
    finally:
        tab.close()
