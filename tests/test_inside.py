"""The "Inside one head" page: every step shown, and the recomputed head equals the model's attention."""

from __future__ import annotations

import numpy as np
import pytest

from core.attention_heads.inside_head import architecture
from tests.model_factory import build_tiny_gpt_neo
from tests.test_app import open_app, page_errors

PAGE = "app_pages/inside.py"
TEXT = "the bank of a river"


def query_box(at):
    """The query-token box: its key carries a digest of the token labels (``ui.page_state``)."""
    return next(box for box in at.selectbox if box.key.startswith("inside.query"))


def _difference(at) -> float:
    metric = next(m for m in at.metric if m.label.startswith("Largest difference"))
    return float(metric.value)


def test_block_kinds(tiny_bert, tiny_gpt2, bundled):
    assert tuple(architecture(m).kind for m in (tiny_bert, tiny_gpt2, bundled)) == ("bert", "gpt2", "bert")


def _page_charts(at) -> list:
    """The page's charts, without the hidden empty chart a freshly started server draws first to preload Plotly's code
    (``ui.startup``: only the first run of a process draws it)."""
    return [chart for chart in at.get("plotly_chart") if '"x":[]' not in chart.proto.spec.replace(" ", "")]


@pytest.mark.app
def test_encoder_page_shows_every_step_and_matches_the_model(tiny_bert_dir):
    at = open_app({"model": tiny_bert_dir, "text": TEXT, "layer": "1", "head": "3"}, page=PAGE)
    assert not page_errors(at)
    assert (at.selectbox(key="inside.layer").value, at.selectbox(key="inside.head").value) == (1, 3)
    assert query_box(at).value == 1  # the first token that is not [CLS]
    assert _difference(at) < 1e-5
    # query, keys, scores → scaled → weights, values, output, full matrix
    assert len(_page_charts(at)) == 6
    table = at.dataframe[0].value
    assert list(table["key token"]) == ["[CLS]", "the", "bank", "of", "a", "river", "[SEP]"]
    assert table["weight"].sum() == pytest.approx(1.0, abs=1e-9)
    assert table["visible"].all()
    text = " ".join(m.value for m in at.markdown)
    assert "post-LN" in text and "not batch norm" in text


@pytest.mark.app
def test_decoder_page_applies_the_causal_mask(tiny_gpt2_dir):
    at = open_app({"model": tiny_gpt2_dir, "text": TEXT, "layer": "0", "head": "1"}, page=PAGE)
    assert not page_errors(at)
    query_box(at).set_value(2).run()
    assert not page_errors(at)
    assert _difference(at) < 1e-5
    table = at.dataframe[0].value
    assert len(table) > 3
    assert list(table["visible"]) == [position <= 2 for position in table["position"]]  # itself and earlier tokens
    assert np.all(table["weight"][~table["visible"]] == 0.0)
    assert np.all(np.isneginf(table["scaled"][~table["visible"]]))
    assert table["weight"].sum() == pytest.approx(1.0, abs=1e-9)
    assert len(_page_charts(at)) == 7  # + the masked score matrix
    text = " ".join(m.value for m in at.markdown)
    assert "pre-LN" in text and "added (not concatenated)" in text


@pytest.mark.app
def test_unsupported_architecture_is_explained(tmp_path):
    folder = build_tiny_gpt_neo(tmp_path / "tiny-gpt-neo")
    at = open_app({"model": str(folder), "text": TEXT}, page=PAGE)
    assert not page_errors(at)
    assert any("gpt_neo" in i.value and "GPT-2" in i.value and "BERT" in i.value for i in at.info)


@pytest.mark.app
@pytest.mark.integration
def test_bundled_model_page_matches_the_model():
    at = open_app({"layer": "5", "head": "11"}, page=PAGE)
    assert not page_errors(at)
    assert at.selectbox(key="inside.layer").value == 5
    assert _difference(at) < 1e-5


@pytest.mark.app
@pytest.mark.integration
def test_smollm2_page_rotates_and_shares_heads(bundled_lm):
    """SmolLM2: 9 query heads share 3 key/value heads; head 4 reads key/value head 1 with heads 3 and 5."""
    at = open_app({"model": "SmolLM2-135M-Instruct", "text": "The capital of France is Paris.", "layer": "7",
                   "head": "4"}, page=PAGE)
    assert not page_errors(at)
    assert _difference(at) < 1e-5
    text = " ".join(m.value for m in at.markdown)
    assert "reads key/value head 1, and so do query heads 3, 5" in text and "rotated" in text


@pytest.mark.app
def test_a_bert_lookalike_is_refused_with_a_sentence(tmp_path):
    from tests.model_factory import build_tiny_megatron_bert

    at = open_app({"model": str(build_tiny_megatron_bert(tmp_path / "megatron")), "text": TEXT}, page=PAGE)
    assert not at.exception
    notes = " ".join(i.value for i in at.info) + " ".join(e.value for e in at.error)
    assert "megatron-bert" in notes and "attention interface" in notes
    assert not any("post-LN" in m.value for m in at.markdown)  # the old page called it post-LN


@pytest.mark.app
def test_electra_says_what_its_embedding_layer_is(tmp_path):
    from tests.model_factory import build_tiny_electra

    at = open_app({"model": str(build_tiny_electra(tmp_path / "electra")), "text": TEXT, "layer": "0"}, page=PAGE)
    assert not page_errors(at)
    text = " ".join(m.value for m in at.markdown)
    assert "embeddings_project" in text and "This model (electra) is post-LN" in text
    assert _difference(at) < 1e-5


@pytest.mark.app
def test_recorded_decoder_shows_rotation_shared_heads_window_and_cap(tmp_path):
    """Gemma 2 (tiny): rotary step, grouped-query sharing, a sliding window drawn as masked cells, soft-capped scores."""
    from tests.model_factory import build_tiny_decoder

    folder = build_tiny_decoder(tmp_path / "tiny-gemma2", "gemma2")
    text = "I will hike along the bank of a river."
    at = open_app({"model": str(folder), "text": text, "layer": "0", "head": "3"}, page=PAGE)
    assert not page_errors(at)
    last = len(at.dataframe[0].value) - 1
    query_box(at).set_value(last).run()
    assert not page_errors(at)
    assert _difference(at) < 1e-5
    table = at.dataframe[0].value
    # window 4: the token itself and the 3 before it (computed here by position, not read from the page)
    assert list(table["visible"]) == [last - 3 <= p <= last for p in table["position"]]
    assert np.all(np.isneginf(table["scaled"][~table["visible"]]))
    assert np.all(np.abs(table["scaled"][table["visible"]]) <= 2.0)  # the cap of this config
    text_on_page = " ".join(m.value for m in at.markdown)
    assert "rotated" in text_on_page and "reads key/value head 1, and so do query heads 2" in text_on_page
    assert "sliding window of 4 tokens" in text_on_page and "soft-capped" in text_on_page
    assert "`input_layernorm(hidden state)`" in text_on_page
    assert len(at.get("plotly_chart")) == 8  # + the rotation figure
