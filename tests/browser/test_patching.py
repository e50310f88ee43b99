"""The Patching page and the sampling controls on the real SmolLM2 in Chromium: hostile prompts are drawn as text,
no dialog opens, no console error, nothing but localhost."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from tests.browser.conftest import AppPage
from tests.browser.test_bundled_lm import lm_server  # noqa: F401 (fixture: the app with the converted SmolLM2)

pytestmark = pytest.mark.browser
HOSTILE = "<script>alert(1)</script> \"><img src=x onerror=alert(1)>"
# The patched pair is short (15 tokens): residual patching runs the model once per layer and position, so its cost
# grows with the square of the length, and the test is about how hostile tokens are drawn, not about the circuit.
# The longer HOSTILE (33 tokens with a pair around it) is drawn on the cheaper views after it.
PATCHED_HOSTILE = "<img src=x onerror=alert(1)>"
PAIR = "{} Then {} waved to"


def test_patching_page_with_hostile_prompts(browser, lm_server):
    tab = AppPage(browser, lm_server)
    tab.patience_ms = 240_000
    try:
        query = {"model": "SmolLM2-135M-Instruct", "clean": PAIR.format(PATCHED_HOSTILE, "John"),
                 "corrupted": PAIR.format(PATCHED_HOSTILE, "Mary"), "answer": " Mary", "wrong": " John"}
        page = tab.open("patching", query)
        page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=240_000)
        ticks = page.eval_on_selector_all(".js-plotly-plot .xtick text", "els => els.map(e => e.textContent)")
        assert any("<" in t for t in ticks), ticks  # the hostile tokens are labels, shown as text
        assert page.locator("img[src='x']").count() == 0
        assert page.get_by_text("of the way from corrupted").count() == 1
        tab.assert_clean()

        page = tab.open("patching", query | {"clean": PAIR.format(HOSTILE, "John"), "corrupted": HOSTILE, "view": "dla"})
        assert page.locator("img[src='x']").count() == 0 and page.locator("script:text('alert(1)')").count() == 0
        assert page.get_by_text("same number of tokens").count() >= 1  # the label, and no grid for unequal lengths
        assert page.get_by_text("patching copies activations position by position").count() == 0  # DLA needs no pair
        assert page.get_by_text("All parts add up to the total").count() == 1
        tab.assert_clean()

        page = tab.open("predictions", {"model": "SmolLM2-135M-Instruct", "text": HOSTILE + " The capital of France is",
                                        "topk": "3", "steps": "3"})
        page.get_by_text("tokens can be drawn").first.wait_for(timeout=240_000)
        assert page.get_by_text("3 of 49,152 tokens can be drawn").count() == 1
        assert page.get_by_text("3 tokens written (greedy)").count() == 1
        tab.assert_clean()
    finally:
        tab.close()


def test_stop_ends_a_generation_in_the_browser_and_keeps_its_text(browser, lm_server):
    """Issue 27, item 2, as a reader meets it: a long generation on SmolLM2 is written a chunk at a time with a Stop
    button; a click on Stop ends it, the text written so far stays, and Continue is offered."""
    tab = AppPage(browser, lm_server)
    tab.patience_ms = 240_000
    try:
        query = {"model": "SmolLM2-135M-Instruct", "text": "Once upon a time, in a quiet village,", "steps": "40",
                 "sample": "true", "seed": "11"}
        page = tab.page
        page.goto(f"{tab.base_url}/predictions?{urlencode(query)}", wait_until="domcontentloaded")  # never idle: it writes
        stop = page.locator(".st-key-generation-stop button").first  # the fragment redraws it while it writes
        stop.wait_for(timeout=240_000)
        stop.click()
        said = page.get_by_text("tokens; the text so far is kept")
        said.wait_for(timeout=120_000)
        written = int(said.inner_text().split("Stopped after ")[1].split(" of ")[0])
        assert 0 < written < 40 and "of 40 tokens" in said.inner_text()
        assert page.locator(".st-key-generation-continue button").count() == 1
        tab.wait_until_idle()
        tab.assert_clean()
    finally:
        tab.close()
