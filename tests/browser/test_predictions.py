"""The predictions page in a real browser: the bundled model's plain 'no head' message, fill-ins, next tokens."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from tests.model_factory import build_tiny_bert_mlm, build_tiny_gpt2_lm

pytestmark = pytest.mark.browser


def test_bundled_model_says_it_has_no_head(app_page):
    page = app_page.open("predictions", {"text": "The cat sat on the mat."})
    page.wait_for_selector("text=has no language-model head", timeout=60_000)
    assert page.locator("text=bert-base-uncased").count() >= 1
    assert page.locator(".js-plotly-plot").count() == 0  # a random head's noise is never shown
    app_page.assert_clean()


def test_fill_ins_paint_for_a_masked_lm(app_page, tmp_path):
    folder = build_tiny_bert_mlm(tmp_path / "tiny-bert-mlm")
    page = app_page.open("predictions", {"model": str(folder), "text": "the [MASK] of a river", "top_k": "4"})
    page.wait_for_selector(".js-plotly-plot .barlayer .point", timeout=60_000)
    assert page.locator(".js-plotly-plot .barlayer .point").count() == 4
    assert page.locator('[data-testid="stDataFrame"]').count() == 1
    app_page.assert_clean()


def test_next_tokens_paint_for_a_causal_lm(app_page, tmp_path):
    folder = build_tiny_gpt2_lm(tmp_path / "tiny-gpt2-lm")
    page = app_page.open("predictions", {"model": str(folder), "text": "the cat sat", "top_k": "3"})
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=60_000)
    # the first figure is the next-token chart (the logit lens grid of a language model follows it)
    cells = page.locator(".js-plotly-plot").first.locator(".textpoint text").all_text_contents()
    tokens = AutoTokenizer.from_pretrained(folder)("the cat sat")["input_ids"]
    assert len(cells) == 3 * len(tokens)  # a candidate in every cell: 3 ranks after every token
    app_page.assert_clean()
