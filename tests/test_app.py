"""Every page through streamlit.testing.v1.AppTest (no JavaScript, no Plotly rendering)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.pages_registry import landed_pages

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")


def open_app(query: dict[str, str] | None = None, page: str | None = None) -> AppTest:
    """The app opened as a link opens it: ``page`` (the home page when None) with ``query``, its first run."""
    at = AppTest.from_file(APP, default_timeout=180)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    if page is not None:
        at.switch_page(page)
    at.run()
    return at


def model_picker(at: AppTest):
    """The sidebar's model selectbox (its widget key carries a hash of its labels, so it is found by its label)."""
    return next(box for box in at.selectbox if box.label == "Model")


def choose_head(at: AppTest, head: int) -> None:
    """Choose ``head`` on the Attention page as its head switch does (its "Head n" buttons are the page's only head
    control there): the browser reports the choice and ``ui.head_switch``'s callback gives the page's ``head`` option
    the value for the next run (``ui.page_state.set_option``), which AppTest, without JavaScript, does here; then run."""
    at.session_state["page_state"].pending["attention.head"] = head
    at.run()


def head_switch_data(at: AppTest) -> dict | None:
    """What the Attention page's head switch was sent (``viz.head_cells.from_wire``), or None where it is not drawn."""
    from viz.head_cells import from_wire

    sent = [c.proto for c in at.get("bidi_component") if c.proto.component_name.endswith("attention_head_switch")]
    return from_wire(sent[0].bytes) if sent else None


def head_switch_weights(at: AppTest):
    """The weights of the head the switch shows, as the browser decodes them (NaN where masked)."""
    from viz.head_cells import decode_codes

    data = head_switch_data(at)
    return decode_codes(data["heads"][data["head"]], data["step"], (len(data["rows"]), len(data["cols"])))


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
    assert model_picker(at).value == tiny_gpt2_dir


@pytest.mark.app
def test_example_button_fills_the_text(tiny_bert_dir):
    from core.teaching.examples import BANK_MONEY

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


# --- Encoder-decoder models (T5, BART): a second box for the target, three attentions ---

SEQ2SEQ_FIXTURES = ["tiny_t5_dir", "tiny_bart_dir"]


@pytest.mark.app
@pytest.mark.parametrize("page", [file for file, _ in landed_pages()])
@pytest.mark.parametrize("model_fixture", SEQ2SEQ_FIXTURES)
def test_every_page_runs_on_tiny_encoder_decoders(page, model_fixture, request):
    at = open_app({"model": request.getfixturevalue(model_fixture), "target": "the cat sat on the mat"}, page=page)
    assert not page_errors(at)


@pytest.mark.app
def test_the_target_box_is_only_there_for_encoder_decoders(tiny_bert_dir, tiny_t5_dir):
    assert not [t for t in open_app({"model": tiny_bert_dir}).text_area if t.key == "target"]
    at = open_app({"model": tiny_t5_dir, "target": "the bank"})
    assert at.text_area(key="target").value == "the bank"


@pytest.mark.app
@pytest.mark.parametrize("model_fixture", SEQ2SEQ_FIXTURES)
def test_an_empty_target_is_generated_and_fills_the_box(model_fixture, request):
    from core.model.models import load_model
    from core.model.seq2seq import generate_target

    folder = request.getfixturevalue(model_fixture)
    at = open_app({"model": folder, "text": "the cat sat"}, page="app_pages/attention.py")
    assert not page_errors(at)
    expected = generate_target(load_model(folder), "the cat sat", max_tokens=64)
    assert at.text_area(key="target").value == expected
    assert any("written by the model itself" in c.value for c in at.caption)


@pytest.mark.app
@pytest.mark.parametrize("stack", ["Encoder self-attention", "Decoder self-attention", "Cross-attention"])
@pytest.mark.parametrize("view", ["one head", "one layer", "BertViz"])
def test_attention_page_shows_every_stack_and_view(stack, view, tiny_bart_dir):
    query = {"model": tiny_bart_dir, "text": "the bank of a river", "target": "the cat sat", "stack": stack, "view": view}
    at = open_app(query, page="app_pages/attention.py")
    assert not page_errors(at)
    assert at.segmented_control(key="attention.stack").value == stack


@pytest.mark.app
@pytest.mark.parametrize("stack", ["Decoder self-attention", "Cross-attention"])
@pytest.mark.parametrize("page", ["app_pages/maxima.py", "app_pages/stats.py"])
def test_maxima_and_statistics_per_stack(page, stack, tiny_t5_dir):
    at = open_app({"model": tiny_t5_dir, "text": "the bank of a river", "target": "the cat sat", "stack": stack,
                   "words": "true"}, page=page)
    assert not page_errors(at)


@pytest.mark.app
@pytest.mark.parametrize("page", ["app_pages/drift.py", "app_pages/senses.py", "app_pages/compare.py", "app_pages/predictions.py",
                                  "app_pages/effects.py", "app_pages/qk-map.py", "app_pages/tour.py",
                                  "app_pages/long-context.py"])
def test_pages_that_do_not_apply_say_so(page, tiny_t5_dir):
    at = open_app({"model": tiny_t5_dir, "target": "the cat"}, page=page)
    assert not page_errors(at)
    assert any("encoder-decoder model" in i.value for i in at.info)


@pytest.mark.app
def test_a_written_target_is_rewritten_when_the_source_changes(tiny_t5_dir):
    from core.model.models import load_model
    from core.model.seq2seq import generate_target

    at = open_app({"model": tiny_t5_dir, "text": "the cat sat"}, page="app_pages/attention.py")
    first = at.text_area(key="target").value
    at.text_area(key="text").set_value("a bass fish swims").run()
    assert not page_errors(at)
    second = at.text_area(key="target").value
    assert second == generate_target(load_model(tiny_t5_dir), "a bass fish swims", max_tokens=64)
    assert first == generate_target(load_model(tiny_t5_dir), "the cat sat", max_tokens=64)
    typed = "my own target"
    at.text_area(key="target").set_value(typed).run()
    at.text_area(key="text").set_value("the bank of a river").run()
    assert at.text_area(key="target").value == typed  # a target the user typed is never replaced


@pytest.mark.app
def test_a_stopped_generation_is_a_sentence_and_can_be_restarted(tiny_bart_dir):
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["model"] = tiny_bart_dir
    at.query_params["text"] = "the cat sat"
    at.session_state["_generation_stopped"] = (tiny_bart_dir, "the cat sat", 64)  # what the Stop button records
    at.run()
    assert not page_errors(at)
    assert any("stopped the generation" in i.value for i in at.info)
    assert at.text_area(key="target").value == ""
    at.button(key="seq2seq-generate").click().run()
    assert not page_errors(at)
    assert at.text_area(key="target").value.strip()


@pytest.mark.app
@pytest.mark.parametrize("stack", ["Encoder self-attention", "Decoder self-attention", "Cross-attention"])
@pytest.mark.parametrize("model_fixture", SEQ2SEQ_FIXTURES)
def test_inside_one_head_reproduces_every_stack(stack, model_fixture, request):
    query = {"model": request.getfixturevalue(model_fixture), "text": "the bank of a river", "target": "the cat sat",
             "stack": stack, "layer": "1", "head": "2"}
    at = open_app(query, page="app_pages/inside.py")
    assert not page_errors(at)
    assert any("reproduces the model's attention" in s.value for s in at.success)


ATTENTION_PAGES = ["app_pages/attention.py", "app_pages/maxima.py", "app_pages/stats.py", "app_pages/inside.py", "app_pages/compare.py"]


@pytest.mark.app
@pytest.mark.parametrize("page", ATTENTION_PAGES)
def test_every_page_showing_attention_carries_the_caveat(page, tiny_bert_dir):
    from ui.caveats import ATTENTION_CAVEAT

    at = open_app({"model": tiny_bert_dir}, page=page)
    assert not page_errors(at)
    assert [c.value for c in at.caption].count(ATTENTION_CAVEAT) == 1


def test_the_caveat_names_its_sources():
    from ui.caveats import ATTENTION_CAVEAT

    for source in ("Jain & Wallace 2019", "Wiegreffe & Pinter 2019", "Serrano & Smith 2019"):
        assert source in ATTENTION_CAVEAT


@pytest.mark.app
@pytest.mark.parametrize(("page", "source"), [("app_pages/attention.py", "norm-weighted"), ("app_pages/maxima.py", "norm-weighted")])
def test_word_level_follows_one_rule_for_norm_weighted_attention(page, source, tiny_bert_dir):
    """Word level is refused for norm-weighted attention on both pages, even when a link asks for it."""
    from ui.caveats import WORD_LEVEL_HELP, word_level_allowed

    assert not word_level_allowed(source) and word_level_allowed("raw") and word_level_allowed("rollout")
    at = open_app({"model": tiny_bert_dir, "text": "the banks of a river", "source": source, "words": "true"}, page=page)
    assert not page_errors(at)
    toggle = at.toggle(key=f"{Path(page).stem}.words")
    assert toggle.disabled and toggle.help == WORD_LEVEL_HELP
    assert not any("Word level:" in c.value for c in at.caption)


@pytest.mark.app
def test_picker_offers_both_bundled_models_by_what_they_are():
    at = open_app()
    picker = model_picker(at)
    assert picker.options[:2] == ["all-MiniLM-L6-v2 — sentence encoder (bundled)", "SmolLM2-135M-Instruct — language model (bundled)"]
    assert picker.value == "all-MiniLM-L6-v2"  # the default stays the sentence encoder
    assert "gpt2" in picker.options  # other suggestions by their plain names


@pytest.mark.app
def test_home_links_every_page_and_its_table_says_no_word_for_special_tokens(tiny_bert_dir):
    """Issue 28: the list left out "Does it matter?"; the word column printed "None" for [CLS]."""
    at = open_app({"model": tiny_bert_dir, "text": "the bank of a river"})
    linked = {e.proto.page for e in at.get("page_link")}
    assert linked == {path for _file, path in landed_pages() if path}, linked
    table = at.dataframe[0].value
    assert list(table["word"]) == ["", "0", "1", "2", "3", "4", ""]
