"""The bundled language model in a real browser: a link with ?model=SmolLM2-135M-Instruct paints its attention
and its next-token predictions, offline, with nothing but localhost."""

from __future__ import annotations

import pytest

from tests.browser.conftest import AppPage

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def lm_server(bundled_lm, app_server):
    """The shared app server; ``bundled_lm`` has converted SmolLM2 into the app's cache first, so the page loads it
    from there instead of converting it within the page's wait."""
    return app_server


def test_a_link_to_smollm2_paints_attention_and_predictions(browser, lm_server):
    tab = AppPage(browser, lm_server)
    try:
        page = tab.open("attention", {"model": "SmolLM2-135M-Instruct", "text": "The cat sat on the mat."})
        page.locator(".js-plotly-plot:visible").first.wait_for(timeout=120_000)  # some sit in closed tabs
        picker = page.get_by_role("combobox", name="Model")
        assert picker.input_value() == "SmolLM2-135M-Instruct — language model (bundled)"
        tab.assert_clean()

        page = tab.open("predictions", {"model": "SmolLM2-135M-Instruct", "text": "The capital of France is"})
        page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=120_000)
        cells = page.eval_on_selector_all(".js-plotly-plot .textpoint text", "els => els.map(e => e.textContent)")
        assert "·Paris" in cells, cells  # " Paris", its space shown as "·" (viz.predictions)
        assert page.get_by_text("has no language-model head").count() == 0
        tab.assert_clean()
    finally:
        tab.close()
