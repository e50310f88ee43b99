"""Issue 19 without a browser: URL-safe texts, option values, CSV mistakes, truncation sentences, model reloads.

The navigation, reload and new-tab behaviour is tested in a real browser (tests/browser/test_navigation.py).
"""

from __future__ import annotations

import shutil
from urllib.parse import quote

import pytest

from core.errors import AnalysisError
from core.representations.corpus import CorpusError, guess_text_column, read_table
from core.representations.senses import read_sentence_csv
from tests.model_factory import build_tiny_bert, build_tiny_bert_mlm
from ui import linked_texts as lt
from ui import option_values as ov
from ui import page_state as ps

CJK = "銀行の川岸で座った。"  # 10 characters, 3 bytes each in UTF-8, 9 bytes each percent-encoded


# --- texts in the URL ---------------------------------------------------------------------------------


def test_encoded_size_counts_percent_encoded_utf8_bytes():
    assert lt.encoded_bytes("abc") == 3
    assert lt.encoded_bytes(CJK) == len(quote(CJK, safe="")) == 9 * len(CJK)  # 3 UTF-8 bytes, each %XX
    assert lt.encoded_bytes("a b&c") == len("a%20b%26c")


def test_limit_is_on_encoded_bytes_not_characters():
    at_limit = "川" * (lt.URL_TEXT_MAX_BYTES // 9)  # 222 CJK characters = 1,998 encoded bytes
    assert lt.fits_in_url(at_limit)
    assert not lt.fits_in_url(at_limit + "川")
    assert lt.fits_in_url("a" * lt.URL_TEXT_MAX_BYTES) and not lt.fits_in_url("a" * (lt.URL_TEXT_MAX_BYTES + 1))


def test_content_id_is_short_stable_and_distinct():
    assert lt.text_id("the bank") == lt.text_id("the bank")
    assert lt.text_id("the bank") != lt.text_id("the bank.")
    assert len(lt.text_id("x" * 100_000)) == 12


# --- option values ----------------------------------------------------------------------------------


def _spec(widget: str, **arguments):
    return ov.option_spec(widget, arguments)


def test_selection_values_round_trip_as_the_option_not_the_label():
    spec = _spec("selectbox", options=range(8), format_func=lambda i: f"{i}: token", index=1)
    assert spec.default == 1
    assert ov.value_to_url(spec, 6) == "6"
    assert ov.value_from_url(spec, "6") == 6
    assert ov.value_from_url(spec, "6: token") == 6  # older links held the label
    assert ov.value_from_url(spec, "mat") is ov.MISSING


def test_invalid_values_are_clamped_or_fall_back_to_the_default():
    layers = _spec("selectbox", options=range(2))
    assert ov.valid_value(layers, 4) == 1  # a layer past a smaller model: the last one
    assert ov.valid_value(layers, "4") == 0  # a string on an integer option (the old shared-key crash): the default
    special = _spec("toggle")
    assert ov.valid_value(special, "hide") is False
    sources = _spec("selectbox", options=["show", "hide", "renormalise"])
    assert ov.valid_value(sources, True) == "show"
    slider = _spec("slider", min_value=0, max_value=2, value=2)
    assert ov.valid_value(slider, 6) == 2 and ov.value_from_url(slider, "1") == 1 and ov.value_from_url(slider, "x") is ov.MISSING
    text = _spec("text_area", value="default", max_chars=5)
    assert ov.valid_value(text, "abcdefgh") == "abcde" and ov.valid_value(text, 3) == "default"


def test_booleans_in_the_url():
    spec = _spec("toggle")
    assert ov.value_to_url(spec, True) == "true"
    assert [ov.value_from_url(spec, raw) for raw in ("true", "True", "1", "false")] == [True, True, True, False]
    assert ov.value_from_url(spec, "hide") is ov.MISSING


def test_multi_select_is_refused_with_a_clear_error():
    with pytest.raises(TypeError):
        _spec("pills", options=["a", "b"], selection_mode="multi")


def test_the_starting_value_argument_names_the_value_in_each_widgets_terms():
    layers = _spec("selectbox", options=range(4), format_func=lambda i: f"layer {i}", index=0)
    assert ov.starting_value_argument("selectbox", layers, 2) == {"index": 2}  # the option's place, not its label
    sources = _spec("radio", options=["raw", "norm-weighted"])
    assert ov.starting_value_argument("radio", sources, "norm-weighted") == {"index": 1}
    typed = _spec("selectbox", options=["bank", "seal"], accept_new_options=True)
    assert ov.starting_value_argument("selectbox", typed, "bass") == {}  # no index names a typed entry
    over = _spec("segmented_control", options=["text", "examples"], default="text")
    assert ov.starting_value_argument("segmented_control", over, "examples") == {"default": "examples"}
    assert ov.starting_value_argument("slider", _spec("slider", min_value=1, max_value=10, value=1), 6) == {"value": 6}
    assert ov.starting_value_argument("toggle", _spec("toggle"), True) == {"value": True}
    assert ov.starting_value_argument("text_area", _spec("text_area", value=""), "a b") == {"value": "a b"}


def _page_with_every_kind_of_option():
    import streamlit as st

    from ui.page_state import option, page_run

    with page_run("demo"):
        option(st.slider, "Step", 1, 10, 1, key="step")
        option(st.selectbox, "Layer", list(range(4)), format_func=lambda i: f"layer {i}", key="layer")
        option(st.radio, "Source", ["raw", "norm-weighted"], key="source")
        option(st.segmented_control, "Over", ["text", "examples"], default="text", key="over")
        option(st.toggle, "Word level", key="words")
        option(st.text_input, "Heads", value="", key="heads")


def test_each_widget_is_drawn_with_its_value_as_its_default():
    """What a tab falls back to when it draws a widget from a run that did not send the value (the widget's code
    arrived late: tests/browser/test_navigation.py) is the proto's default: it must be the option's value, from a
    link and after a change."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_page_with_every_kind_of_option)
    at.query_params.update({"step": "6", "layer": "2", "source": "norm-weighted", "over": "examples", "words": "true",
                            "heads": "L1H2"})
    at.run()
    assert not at.exception
    assert at.slider[0].proto.default == [6] and at.selectbox[0].proto.default == 2
    assert at.radio[0].proto.default == 1 and at.toggle[0].proto.default is True
    assert at.text_input[0].proto.default == "L1H2"
    assert list(at.button_group[0].proto.default) == [1]  # the option's place among "text", "examples"
    at.slider[0].set_value(3).run()
    assert at.slider[0].proto.default == [3] and at.slider[0].value == 3


# --- item 9: CSV mistakes --------------------------------------------------------------------------


def test_semicolon_and_tab_separated_files_are_read_as_tables():
    for sep in (";", "\t"):
        data = f"title{sep}text\nA{sep}The bank of the river.\nB{sep}Money, in the bank.\n".encode()
        table = read_table(data, "corpus.csv")
        assert list(table.columns) == ["title", "text"]
        assert list(table["text"]) == ["The bank of the river.", "Money, in the bank."]
    sentences, labels = read_sentence_csv(b"sentence;label\nThe bank of the river.;river\nThe bank lent money.;money\n")
    assert sentences == ["The bank of the river.", "The bank lent money."] and labels == ["river", "money"]


def test_numeric_text_column_is_an_error_not_the_title():
    with pytest.raises(CorpusError, match="`text`.*holds no words"):
        read_table(b"title,text\nRiver bank,123\nMoney bank,456\n", "corpus.csv")
    with pytest.raises(AnalysisError, match="`sentence`.*holds no words"):
        read_sentence_csv(b"sentence,label\n1,river\n2,money\n")


def test_unquoted_comma_is_refused_naming_the_row():
    with pytest.raises(AnalysisError, match="Row 2 .* 3 fields .* header has 2"):
        read_sentence_csv(b"sentence,label\nThe bank, of the river.,river\nThe bank lent money.,money\n")
    with pytest.raises(CorpusError, match="Row 3 of the file c.csv has 3 fields"):
        read_table(b"title,text\nA,fine text\nB,a text, with a comma\n", "c.csv")


def test_quoted_commas_and_single_columns_still_work():
    sentences, labels = read_sentence_csv(b'sentence,label\n"The bank, of the river.",river\n')
    assert sentences == ["The bank, of the river."] and labels == ["river"]
    table = read_table(b"text\nOne document here\nAnother one\n", "one.csv")
    assert guess_text_column(table) == "text" and len(table) == 2


# --- item 10: a re-saved model folder loads again ---------------------------------------------------------


def test_model_folder_saved_again_is_loaded_again(tmp_path):
    from ui import results
    from ui.models import loaded_model

    folder = tmp_path / "model"
    build_tiny_bert(folder, layers=2)
    assert loaded_model(str(folder)).num_layers == 2
    assert results.analyses(str(folder), "the bank of a river").attentions.shape[0] == 2
    shutil.rmtree(folder)
    build_tiny_bert(folder, layers=4)
    assert loaded_model(str(folder)).num_layers == 4
    assert results.analyses(str(folder), "the bank of a river").attentions.shape[0] == 4
    assert loaded_model(str(folder)) is loaded_model(str(folder))  # unchanged content: loaded once


# --- items 6 and 7: truncation sentences name the real limit ------------------------------------------------


@pytest.mark.app
def test_mask_past_the_token_limit_is_a_truncation_notice(tmp_path):
    from tests.test_app import open_app, page_errors

    folder = str(build_tiny_bert_mlm(tmp_path / "mlm"))  # reads 64 tokens
    text = "the bank of a river " * 20 + "[MASK]"
    at = open_app({"model": folder, "text": text}, page="app_pages/predictions.py")
    assert not page_errors(at)
    assert any("only the first 64 are used" in i.value for i in at.info)
    assert any("past the first 64 tokens" in w.value for w in at.warning)
    assert not any("has no" in i.value for i in at.info)
    assert not at.button  # nothing offers to overwrite the user's text
    assert at.text_area(key="text").value == text


@pytest.mark.app
def test_drift_truncation_names_the_deployment_limit(tiny_bert_dir, monkeypatch):
    from tests.test_app import open_app, page_errors

    monkeypatch.setenv("EXPLORER_MAX_TOKENS", "16")  # below the tiny model's own 64
    at = open_app({"model": tiny_bert_dir}, page="app_pages/drift.py")
    assert not page_errors(at)
    warning = next(w.value for w in at.warning if "more tokens than" in w.value)
    assert "only their first 16 tokens count" in warning
    assert "reads 64" in warning  # the model's own limit is named as such, not as the cut


# --- a page that ends early ---------------------------------------------------------------------------


def _page_ending_early():
    import streamlit as st

    from ui.page_state import end_page, option, page_run

    with page_run("demo"):
        option(st.text_input, "Heads", key="heads")
        end_page()
        st.write("not reached")


def test_a_page_ended_early_still_removes_the_parameters_it_does_not_own():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_page_ending_early)
    at.query_params["heads"] = "L0H1"
    at.query_params["layer"] = "3"  # another page's parameter, left by a link
    at.run()
    assert not at.exception
    assert at.text_input[0].value == "L0H1"
    assert not [m for m in at.markdown if m.value == "not reached"]
    assert ps.view_query(at.session_state) == {"heads": "L0H1"}


def _page_with_options():
    import streamlit as st

    from ui.page_state import option, page_run

    with page_run("demo"):
        option(st.text_input, "Heads", key="heads")
        option(st.toggle, "Word level", key="words")


def test_option_changes_are_not_written_to_streamlits_query_params():
    """Every ``st.query_params`` write is a new browser-history entry (Streamlit's frontend pushes it), so Back would
    walk through option changes: the view's URL goes to the browser through ``ui.view_url`` instead."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_page_with_options)
    at.query_params["heads"] = "L0H1"
    at.query_params["layer"] = "3"  # another page's parameter, left by a link
    at.run()
    at.text_input[0].input("L1H2").run()
    at.toggle[0].set_value(True).run()
    assert not at.exception
    assert dict(at.query_params) == {"heads": "L0H1", "layer": "3"}  # what the browser sent: the server wrote nothing
    assert ps.view_query(at.session_state) == {"heads": "L1H2", "words": "true"}


def _page_stopped_on_its_first_run():
    import streamlit as st

    from ui.page_state import option, page_run

    with page_run("demo"):
        option(st.text_input, "Heads", key="heads")
        option(st.toggle, "Word level", key="words")
        if not st.session_state.get("stopped once"):
            st.session_state["stopped once"] = True
            st.stop()  # as Streamlit stops a run for a newer one (a widget changed, the column probe reported)


def test_a_change_made_while_a_links_first_run_was_stopped_stands():
    """A link's first run stopped (a probe's report, or the user changing a widget while it ran): the next run still
    reads the link for what the stopped run did not, but the change the user made meanwhile is kept, not replaced
    by the link's value again (a head chosen in the head switch during a link's first runs went back to the link's)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_page_stopped_on_its_first_run)
    at.query_params.update({"heads": "L0H1", "words": "true"})
    at.run()
    assert ps.view_query(at.session_state) == {}  # stopped: the URL is not written yet
    at.text_input[0].input("L1H2").run()
    assert not at.exception
    assert at.text_input[0].value == "L1H2" and at.toggle[0].value is True  # the change, and the link's other option
    assert ps.view_query(at.session_state) == {"heads": "L1H2", "words": "true"}


@pytest.mark.app
@pytest.mark.parametrize("page", ["app_pages/attention.py", "app_pages/stats.py", "app_pages/home.py"])
def test_a_page_that_ends_early_still_removes_other_pages_parameters(tiny_t5_dir, page):
    """An encoder-decoder model ends these pages after their own view (``end_page``); a link's parameter of
    another page (the effects page's ``measure``) must still leave the URL, as on a page that runs to its end."""
    from tests.test_app import open_app, page_errors

    at = open_app({"model": tiny_t5_dir, "text": "the cat sat", "measure": "sentence embedding"}, page=page)
    assert not page_errors(at)
    assert "measure" not in ps.view_query(at.session_state)
    assert ps.view_query(at.session_state).get("model") == tiny_t5_dir


def test_pages_end_early_through_end_page_only():
    """``st.stop()`` leaves a link's other-page parameters in the URL (Streamlit refuses the run's later messages)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    offenders = [
        str(path.relative_to(root))
        for folder in ("app_pages", "ui")
        for path in (root / folder).rglob("*.py")
        if path.name != "page_state.py" and "st.stop()" in path.read_text()
    ]
    assert offenders == []
def test_models_loaded_at_once_leave_masked_lm_heads_loadable(tmp_path):
    """Found by the every-page browser round trip: the start-up warm-up and a page loading models at the same time
    left transformers patched, so a masked LM's tied decoder weights were then reported missing and Predictions
    and Effects said the model had no head. Loads now wait for each other (``core.model.models.WEIGHT_LOAD_LOCK``)."""
    import threading

    from core.model.models import load_model
    from core.outputs.predictions import load_language_model
    from tests.model_factory import build_tiny_gpt2

    folders = [str(build_tiny_bert(tmp_path / f"bert{i}", seed=i)) for i in range(3)] + [str(build_tiny_gpt2(tmp_path / "gpt2"))]
    masked = str(build_tiny_bert_mlm(tmp_path / "mlm"))
    for _ in range(3):
        threads = [threading.Thread(target=load_model, args=(folder,)) for folder in folders]
        for thread in threads:
            thread.start()
        model = load_model(masked)
        for thread in threads:
            thread.join()
        assert load_language_model(model).kind == "masked"
