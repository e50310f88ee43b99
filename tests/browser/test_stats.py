"""The head-statistics page in a real browser: heatmaps paint, the statistic lives in the URL, links open heads."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.browser

TEXT = "The cat sat on the mat. It was happy to be home."


def figure_titles(page) -> list[str]:
    titles = page.locator(".js-plotly-plot .gtitle, .js-plotly-plot .annotation-text")
    return [titles.nth(i).text_content() for i in range(titles.count())]


def test_stats_page_paints_both_heatmaps_and_the_ranked_lists(app_page):
    page = app_page.open("stats", {"text": TEXT})
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=60_000)
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .heatmaplayer').length >= 3")  # 1 + 2 panels
    assert any(t.startswith("Entropy of the attention distribution (nats): this text") for t in figure_titles(page))
    assert any(t == "norm-weighted attention" for t in figure_titles(page))
    main = page.locator('[data-testid="stMain"]')
    for heading in ("most attend to the previous token", "broadest heads", "park attention on [SEP]"):
        assert main.get_by_text(heading, exact=False).count() == 1
    assert main.get_by_role("button", name="Download data (CSV)").count() == 2
    app_page.assert_clean()


def test_the_statistic_comes_from_the_url_and_the_ranked_lists_switch_it(app_page):
    page = app_page.open("stats", {"text": TEXT, "stat": "previous token"})
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=60_000)
    assert any(t.startswith("Share to the previous token") for t in figure_titles(page))
    # the fourth ranked list is the [CLS] / first-token sink: its button shows that statistic, and the URL follows
    page.get_by_role("button", name="Show as heatmap").nth(3).click()
    app_page.wait_until_idle()
    page.wait_for_function("() => new URLSearchParams(location.search).get('stat') === 'first'")
    assert any(t.startswith("Share to [CLS] / the first token") for t in figure_titles(page))
    app_page.assert_clean()


def test_the_example_sentences_are_averaged_with_a_progress_bar_and_cached(app_page):
    page = app_page.open("stats", {"text": TEXT, "over": "example sentences", "stat": "end tokens"})
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=120_000)
    assert any(re.match(r"Share to \[SEP\] / end tokens: 6 texts from the example sentences", t) for t in figure_titles(page))
    assert page.locator(".js-plotly-plot .heatmaplayer").count() == 1  # norm-weighted is for one text only
    app_page.assert_clean()

# Ranked-head links (new tab, same model, text and source) are tested in test_navigation.py.
