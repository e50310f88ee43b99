"""Issue 48, item 6, in Chromium: a long text on SmolLM2 (30 layers) shows the trace's progress by layer with the time
left and a Stop button; a click on Stop ends the pass with the stopped sentence, and the text stays in the sidebar."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import AppPage
from tests.test_long_heatmap import long_text

pytestmark = [pytest.mark.browser, pytest.mark.integration]

MODEL = "SmolLM2-135M-Instruct"
TOKENS = 3000  # about 3,000 tokens (one per word): a pass of many seconds, so the test can click Stop during it
TOLD = re.compile(r"Reading the text: layer ([1-9]\d*) of 30, (about [\w ]+|under a second) left")
STOPPED = re.compile(r"Stopped at layer (\d+) of 30; nothing was kept\. Press Compute again to read the text\.")


@pytest.fixture(scope="module")
def lm_server(bundled_lm, app_server):
    """The shared server; ``bundled_lm`` has converted SmolLM2 into the app's cache first."""
    return app_server


def test_a_long_text_shows_its_layers_and_stops(browser, lm_server):
    tab = AppPage(browser, lm_server)
    text = long_text(TOKENS)
    try:
        page = tab.page
        page.goto(f"{lm_server}/attention?model={MODEL}&text={text.replace(' ', '+')}", wait_until="domcontentloaded")
        # a run the page's first layout rerun ended may leave its bar and Stop in the page, hidden: the visible ones
        bar = page.locator('[data-testid="stProgress"]:visible').filter(has_text=TOLD).last
        bar.wait_for(timeout=300_000)
        assert int(TOLD.search(bar.inner_text()).group(1)) >= 1
        page.locator('[class*="st-key-trace-stop-"] button:visible').last.click()  # the Stop under the bar (by its key)
        said = page.get_by_text(STOPPED)
        said.wait_for(timeout=120_000)
        stopped_at = int(STOPPED.search(said.inner_text()).group(1))
        assert stopped_at < 30  # before the last layer
        tab.wait_until_idle(timeout_ms=120_000)
        assert page.locator('[data-testid="stSidebar"] textarea').first.input_value() == text  # the text stays
        assert page.locator('[class*="st-key-trace-go-on-"] button').filter(has_text="Compute again").count() == 1
        assert page.locator('[data-testid="stProgress"]:visible').count() == 0  # and no pass is running
        assert page.locator('[data-testid="stMain"] .js-plotly-plot:not(.st-key-plotly-preload *)').count() == 0
        tab.assert_clean()
    finally:
        tab.close()
