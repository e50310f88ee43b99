"""The "Inside one head" page in a real browser: every step paints, links and controls set the view."""

from __future__ import annotations

import re

import pytest

from tests.model_factory import build_tiny_gpt2

pytestmark = pytest.mark.browser

TEXT = "I will hike along the bank of a river."


def figure_count(page) -> int:
    return page.locator(".js-plotly-plot").count()


def test_every_step_paints_and_matches_the_model(app_page):
    page = app_page.open("inside", {"text": TEXT, "layer": "2", "head": "3"})
    page.wait_for_selector(".js-plotly-plot .barlayer .point", timeout=60_000)
    page.wait_for_selector(".js-plotly-plot .heatmaplayer")
    assert figure_count(page) == 6  # query, keys, scores → scaled → weights, values, output, full matrix
    difference = page.locator('[data-testid="stMetricValue"]').first.inner_text()
    assert float(difference) < 1e-5
    assert page.locator("text=reproduces the model's attention").count() == 1
    # scores, scaled scores and weights: one bar each per token ([CLS] + 10 tokens + [SEP])
    assert page.locator(".js-plotly-plot").nth(2).locator(".barlayer .point").count() == 3 * 12
    app_page.assert_clean()


def test_choosing_a_head_updates_the_link(app_page):
    page = app_page.open("inside", {"text": TEXT})
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=60_000)
    page.locator('[data-testid="stSelectbox"]').filter(has_text="Head").click()
    page.get_by_role("option", name="7", exact=True).click()
    app_page.wait_until_idle()
    page.wait_for_function("() => new URLSearchParams(location.search).get('head') === '7'")
    page.wait_for_selector(".js-plotly-plot .heatmaplayer")
    assert re.search(r"\d", page.locator('[data-testid="stMetricValue"]').first.inner_text())
    app_page.assert_clean()


def test_decoder_shows_the_causal_mask(app_page, tmp_path):
    folder = build_tiny_gpt2(tmp_path / "tiny-gpt2")
    page = app_page.open("inside", {"model": str(folder), "text": "the bank of a river"})
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=60_000)
    assert figure_count(page) == 7  # + the scores after the causal mask
    # the first token may only look at itself: every later key is drawn as a masked marker
    page.wait_for_selector(".js-plotly-plot .scatterlayer .point")
    assert page.locator("text=causal mask").count() >= 1
    app_page.assert_clean()


# The lines step 4's heading is drawn on, and how far the q·k table's content reaches past
# its frame (the grid scrolls sideways when it is cut).
STEP_LAYOUT_JS = """() => {
    const heading = [...document.querySelectorAll('[data-testid="stMain"] h2')].find(h => h.textContent.startsWith('4 ·'));
    const range = document.createRange();
    range.selectNodeContents(heading);
    const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.bottom))).size;
    const table = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stDataFrame"]')].pop();
    const scroller = table.querySelector('.dvn-scroller') || table;
    return {headingLines: lines,
            tableCut: scroller.scrollWidth - scroller.clientWidth, column: document.documentElement.dataset.mainColumn};
}"""


def test_a_laptop_with_the_sidebar_open_stacks_text_and_figures(app_page):
    """Issue 40, item 14: at 1024 × 768 with the sidebar open the text column got two fifths of a 600-px main column:
    the headings broke word by word and the q·k table was cut at the right."""
    from tests.browser.slide_checks import REFITTED_JS

    app_page.page.set_viewport_size({"width": 1024, "height": 768})
    page = app_page.open("inside", {"text": TEXT})
    page.wait_for_function(REFITTED_JS, timeout=60_000, polling=100)
    app_page.wait_until_idle()
    layout = page.evaluate(STEP_LAYOUT_JS)
    assert int(layout["column"]) < 780, layout  # the sidebar is open: a narrow main column
    assert layout["headingLines"] <= 2 and layout["tableCut"] <= 1, layout
    app_page.assert_clean()
