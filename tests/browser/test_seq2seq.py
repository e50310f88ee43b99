"""Encoder-decoder models (tiny T5 and BART) in a real browser: every page from a deep link with hostile
source and target text, on the two models in turn (``matrix.in_turn``); cross-attention heatmaps; BertViz's
encoder-decoder views offline."""

from __future__ import annotations

import pytest

from tests.browser.matrix import in_turn
from tests.browser.test_hostile import ATTACK, injected_texts
from tests.pages_registry import landed_pages

pytestmark = pytest.mark.browser

IFRAME = 'iframe[data-testid="stIFrame"], [data-testid="stIFrame"] iframe'
MODELS = ["tiny_t5_dir", "tiny_bart_dir"]


def _texts(locator) -> list[str]:
    return locator.evaluate_all("els => els.map(e => e.textContent)")


@pytest.mark.parametrize(("path", "model_fixture"), in_turn([path for _, path in landed_pages()], MODELS))
def test_a_hostile_deep_link_runs_nothing_on_an_encoder_decoder(module_tab, path, model_fixture, request):
    model = request.getfixturevalue(model_fixture)
    module_tab.forget()
    page = module_tab.open(path, {"model": model, "text": ATTACK, "target": ATTACK, "stack": "Cross-attention"})
    module_tab.wait_until_drawn()  # iframes and figures drawn, and what they run on load run
    assert not injected_texts(page), injected_texts(page)
    target_box = page.locator('[data-testid="stSidebar"]').get_by_role("textbox", name="Target text")
    assert target_box.input_value() == ATTACK  # the target survived, as typed
    module_tab.assert_clean()


@pytest.mark.parametrize("model_fixture", MODELS)
def test_cross_attention_head_has_target_rows_and_source_columns(app_page, model_fixture, request):
    model = request.getfixturevalue(model_fixture)
    query = {"model": model, "text": "the bank of a river", "target": "cat mat", "stack": "Cross-attention"}
    page = app_page.open("attention", query)
    # the head switch draws the head: its rows and columns said under its title, its shape the tokens'
    axes = page.locator('[data-testid="stMain"] .head-switch .axes')
    axes.wait_for(timeout=60_000)
    said = axes.text_content()
    assert "Rows: target token: query" in said and "Columns: source token: key" in said, said
    heat = page.locator('[data-testid="stMain"] .head-switch canvas[role="img"]')
    box = heat.bounding_box()
    assert box["width"] > box["height"] > 0  # 2 target rows (with their special tokens) × the source's columns
    assert "rows target token: query" in heat.get_attribute("aria-label")
    app_page.assert_clean()


def test_an_empty_target_is_written_by_the_model_and_fills_the_box(app_page, tiny_bart_dir):
    page = app_page.open("attention", {"model": tiny_bart_dir, "text": "the cat sat"})
    box = page.locator('[data-testid="stSidebar"]').get_by_role("textbox", name="Target text")
    box.wait_for(timeout=60_000)
    assert box.input_value().strip()
    assert page.get_by_text("written by the model itself", exact=False).count() >= 1
    app_page.assert_clean()


@pytest.mark.parametrize("kind", ["head view", "model view"])
def test_bertviz_encoder_decoder_views_draw_offline(app_page, kind, tiny_t5_dir):
    query = {"model": tiny_t5_dir, "text": ATTACK, "target": ATTACK, "view": "BertViz", "bertviz": kind,
             "stack": "Cross-attention"}
    page = app_page.open("attention", query)
    frame = page.frame_locator(IFRAME).first
    frame.locator("#vis svg").first.wait_for(timeout=60_000)
    assert frame.locator("#vis svg line, #vis svg rect, #vis svg text").count() > 10
    options = _texts(frame.locator("#filter option"))
    assert options == ["Encoder", "Decoder", "Cross"], options
    assert frame.locator("#filter").input_value() == "2"  # opened on cross-attention, as the page's selector says
    assert frame.locator("img").count() == 0
    app_page.assert_clean()
