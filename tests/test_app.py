"""Every page through streamlit.testing.v1.AppTest (no JavaScript, no Plotly rendering)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.pages_registry import landed_pages

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")


def open_app(query: dict[str, str] | None = None, page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    if page is not None:
        # Like following a link to the page: the home page removed the parameters it does not own.
        for key, value in (query or {}).items():
            at.query_params[key] = value
        at.switch_page(page)
        at.run()
    return at


def page_errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error] + [str(e.value) for e in at.exception]


@pytest.mark.app
@pytest.mark.integration
@pytest.mark.parametrize("page", [file for file, _ in landed_pages()])
def test_every_page_runs_on_the_bundled_model(page):
    at = open_app(page=page)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@pytest.mark.app
@pytest.mark.parametrize("page", [file for file, _ in landed_pages()])
@pytest.mark.parametrize("model_fixture", ["tiny_bert_dir", "tiny_gpt2_dir"])
def test_every_page_runs_on_tiny_models(page, model_fixture, request):
    at = open_app({"model": request.getfixturevalue(model_fixture)}, page=page)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@pytest.mark.app
def test_home_shows_the_tokens_of_the_text(tiny_bert_dir):
    at = open_app({"model": tiny_bert_dir, "text": "the bank of a river"})
    assert not page_errors(at)
    table = at.dataframe[0].value
    assert list(table["token"]) == ["[CLS]", "the", "bank", "of", "a", "river", "[SEP]"]


@pytest.mark.app
def test_sidebar_reads_model_and_text_from_the_url(tiny_gpt2_dir):
    at = open_app({"model": tiny_gpt2_dir, "text": "the cat sat"})
    assert at.text_area(key="text").value == "the cat sat"
    assert at.selectbox(key="model").value == tiny_gpt2_dir


@pytest.mark.app
def test_example_button_fills_the_text(tiny_bert_dir):
    from core.examples import BANK_MONEY

    at = open_app({"model": tiny_bert_dir})
    at.pills(key="example").set_value("bank (money)").run()
    assert at.text_area(key="text").value == BANK_MONEY
    assert not page_errors(at)


@pytest.mark.app
@pytest.mark.parametrize("text", ["", "   "])
def test_empty_text_is_a_sentence_not_a_traceback(text, tiny_bert_dir):
    at = open_app({"model": tiny_bert_dir, "text": text})
    assert not at.exception
    assert any("no text to analyse" in e.value for e in at.error)


@pytest.mark.app
def test_unloadable_model_is_a_sentence_and_keeps_the_text(tmp_path):
    at = open_app({"model": str(tmp_path / "missing"), "text": "keep me"})
    assert not at.exception
    assert any("no model folder" in e.value for e in at.error)
    assert at.text_area(key="text").value == "keep me"


@pytest.mark.app
def test_long_text_is_truncated_with_a_notice(tiny_bert_dir):
    at = open_app({"model": tiny_bert_dir, "text": "the bank of a river " * 40})
    assert not page_errors(at)
    assert any("reads at most" in i.value for i in at.info)
