"""The maxima page in a real browser: the grid, the side-by-side maps and the special-token chart paint."""

from __future__ import annotations

import pytest

from tests.browser.conftest import drawn_count

pytestmark = pytest.mark.browser

TEXT = "I will hike along the bank of a river."


def _grid_cell_texts(page) -> list[str]:
    return page.eval_on_selector_all(".js-plotly-plot .heatmaplayer text", "els => els.map(e => e.textContent)")


def test_maxima_page_paints_on_the_bundled_model(app_page):
    page = app_page.open("maxima", {"text": TEXT})
    page.wait_for_selector("text=Which token does each token attend to most?")
    page.wait_for_selector(".js-plotly-plot .heatmaplayer text", timeout=60_000)
    # grid + side-by-side maps (3 heatmaps in one figure) + the special-token chart
    assert page.locator(".js-plotly-plot").count() == 3
    assert page.locator(".js-plotly-plot").nth(1).locator(".heatmaplayer .hm").count() == 3
    page.wait_for_selector(".js-plotly-plot .scatterlayer .point")
    cells = _grid_cell_texts(page)
    assert len(cells) == 6 * 10  # 6 layers × 10 non-special tokens, each cell names its target
    assert "[CLS]" not in cells and "[SEP]" not in cells
    assert page.locator('[data-testid="stDataFrame"]').count() == 2
    app_page.assert_clean()


def test_a_link_opens_rollout_with_special_tokens(app_page):
    page = app_page.open("maxima", {"text": TEXT, "source": "rollout", "special": "true", "layer": "5"})
    page.wait_for_selector(".js-plotly-plot .heatmaplayer text", timeout=60_000)
    assert page.get_by_role("radio", name="rollout").is_checked()
    cells = _grid_cell_texts(page)
    assert len(cells) == 6 * 12 and "[CLS]" in cells
    assert drawn_count(page, "rollout, layers 0–5") == 1  # the figure, not its text alternative for screen readers
    app_page.assert_clean()


def test_word_level_option_merges_pieces(app_page):
    page = app_page.open("maxima", {"text": "Unbelievably, the riverbank flooded.", "words": "true"})
    page.wait_for_selector(".js-plotly-plot .heatmaplayer text", timeout=60_000)
    ticks = page.locator(".js-plotly-plot").first.locator(".xtick text").all_text_contents()
    assert "Unbelievably" in ticks and "riverbank" in ticks
    app_page.assert_clean()


def test_one_unknown_token_standing_for_400_emoji_draws_without_console_errors(app_page):
    """Issue 28: "🙂" × 400 is one [UNK] labelled with all 400; Plotly put the axis title under that tick label at
    y = −∞ (Chromium logged "<text> attribute y: Expected length, "-Infinity"" twice). Labels are now cut."""
    page = app_page.open("maxima", {"text": "🙂" * 400})
    page.wait_for_selector(".js-plotly-plot .heatmaplayer text", timeout=60_000)
    assert page.locator(".js-plotly-plot").count() == 3
    assert [t for t in _grid_cell_texts(page) if t.endswith("…")]
    app_page.assert_clean()
