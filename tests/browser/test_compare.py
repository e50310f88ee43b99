"""The "Compare two sentences" page in a real browser: both heatmaps, the word's rows and its curve paint."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


def test_bank_sentences_paint(app_page):
    page = app_page.open("compare", {})
    page.wait_for_selector(".js-plotly-plot .scatterlayer .point", timeout=60_000)
    assert page.locator(".js-plotly-plot .heatmaplayer").count() == 2  # text A and text B side by side
    assert page.locator(".js-plotly-plot .barlayer").count() == 2  # where "bank" looks, in each text
    curve = page.locator(".js-plotly-plot").nth(4)
    # hidden states 0..6 of MiniLM, for A vs B and for A vs the same-sense control text
    assert curve.locator(".scatterlayer .trace").count() == 2
    assert curve.locator(".scatterlayer .point").count() == 2 * 7
    assert page.locator("text=is token 6 in A but token 9 in B").count() == 1
    assert curve.locator(".annotation-text", has_text="word-embedding lookup: 1.0000").count() == 1
    app_page.assert_clean()


def test_a_link_sets_texts_and_word_and_typed_markup_stays_text(app_page):
    attack = "<img src=x onerror=alert(1)> the cat sat ![x](http://example.com/x.png)"
    page = app_page.open("compare", {"text_a": attack, "text_b": "A cat <b>ran</b>.", "word": "cat", "layer": "1"})
    page.wait_for_selector(".js-plotly-plot .scatterlayer .point", timeout=60_000)
    assert page.locator('[data-testid="stMain"] img[src="x"]').count() == 0
    assert page.locator('[data-testid="stMain"] b', has_text="ran").count() == 0
    assert page.locator("text=Where “cat” looks (layer 1").count() == 1
    assert page.get_by_label("Text A", exact=True).input_value() == attack
    app_page.assert_clean()  # no dialog, no request to example.com
