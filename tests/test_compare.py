"""One word in two texts: shared words, its similarity at every layer, its raw lookup."""

from __future__ import annotations

import numpy as np
import pytest

from core.model.inference import analyze
from core.representations.compare import (
    SAME_SENSE_CONTROL,
    lookup_similarity,
    shared_words,
    word_attention,
    word_occurrences,
    word_positions,
    word_similarity,
    word_similarity_by_layer,
)
from core.teaching.examples import BANK_MONEY, BANK_RIVER


def test_shared_words_are_case_insensitive_whole_words(tiny_model):
    a = analyze(tiny_model, "I will hike along the Bank of a river.")
    b = analyze(tiny_model, BANK_MONEY)
    assert shared_words(a, b) == ["i", "will", "bank", "a"]  # punctuation is not a word


def test_a_word_of_several_pieces_is_all_its_tokens(tiny_bert):
    a = analyze(tiny_bert, "the banks of the bank")
    assert a.tokens[2:4] == ["bank", "##s"]
    assert word_positions(a, "banks") == [2, 3]
    assert word_positions(a, "BANK") == [6]
    assert word_occurrences(a, "the") == 2 and word_positions(a, "the") == [1]
    with pytest.raises(ValueError):
        word_positions(a, "ban")  # a piece, not a whole word


def test_similarity_is_the_cosine_of_mean_pooled_pieces(tiny_bert):
    a, b = analyze(tiny_bert, "the banks of a river"), analyze(tiny_bert, "my banks and money")
    frame = word_similarity(a, b, "banks")
    assert list(frame["layer"]) == list(range(tiny_bert.num_layers + 1))
    for layer in range(tiny_bert.num_layers + 1):
        u = (a.hidden_states[layer, 2] + a.hidden_states[layer, 3]) / 2
        v = (b.hidden_states[layer, 2] + b.hidden_states[layer, 3]) / 2
        expected = u @ v / np.linalg.norm(u) / np.linalg.norm(v)
        assert frame["cosine_similarity"][layer] == pytest.approx(expected, abs=1e-6)


def test_identical_input_gives_one_at_every_layer(tiny_model):
    frame = word_similarity_by_layer(tiny_model, BANK_RIVER, BANK_RIVER, "bank")
    np.testing.assert_allclose(frame["cosine_similarity"], 1.0, atol=1e-6)


def test_encoder_same_position_differs_only_after_the_embedding_layer(tiny_bert):
    a, b = analyze(tiny_bert, "the bank of a river"), analyze(tiny_bert, "the bank and some money")
    s = word_similarity(a, b, "bank")["cosine_similarity"].to_numpy()
    assert s[0] == pytest.approx(1.0, abs=1e-6)  # same id, same position, same token type
    assert np.all(s[1:] < 1 - 1e-6)  # the encoder sees the different words after it (small in a random model)


def test_decoder_same_prefix_gives_the_same_vector_at_every_layer(tiny_gpt2):
    a, b = analyze(tiny_gpt2, "the bank of a river"), analyze(tiny_gpt2, "the bank and some money")
    s = word_similarity(a, b, "bank")["cosine_similarity"].to_numpy()
    np.testing.assert_allclose(s, 1.0, atol=1e-6)  # causal: "bank" never sees what follows


def test_different_position_differs_already_at_layer_zero(tiny_model):
    a, b = analyze(tiny_model, BANK_RIVER), analyze(tiny_model, BANK_MONEY)
    assert word_positions(a, "bank") != word_positions(b, "bank")
    s = word_similarity(a, b, "bank")["cosine_similarity"].to_numpy()
    assert s[0] < 1 - 1e-4  # position embeddings differ
    assert lookup_similarity(tiny_model, a, b, "bank") == pytest.approx(1.0, abs=1e-12)


def test_lookup_differs_when_the_word_becomes_different_tokens(tiny_gpt2):
    a, b = analyze(tiny_gpt2, "Bank of a river"), analyze(tiny_gpt2, "the bank of a river")
    ids_a = [a.input_ids[p] for p in word_positions(a, "bank")]
    ids_b = [b.input_ids[p] for p in word_positions(b, "bank")]
    assert ids_a != ids_b  # "Bank" at the start vs " bank" after a space
    assert lookup_similarity(tiny_gpt2, a, b, "bank") < 1 - 1e-4


def test_word_attention_is_the_mean_of_its_pieces_rows(tiny_bert):
    a = analyze(tiny_bert, "the banks of a river")
    row = word_attention(a, "banks", 1, 2)
    np.testing.assert_allclose(row, (a.attentions[1, 2, 2] + a.attentions[1, 2, 3]) / 2)
    assert row.sum() == pytest.approx(1.0, abs=1e-5)


@pytest.mark.integration
def test_bundled_bank_curve(bundled):
    a, b = analyze(bundled, BANK_RIVER), analyze(bundled, BANK_MONEY)
    assert "bank" in shared_words(a, b)
    s = word_similarity(a, b, "bank")["cosine_similarity"].to_numpy()
    assert len(s) == bundled.num_layers + 1
    assert np.all(s < 1 - 1e-4)  # different texts: below 1 everywhere, layer 0 included (positions 6 vs 9)
    assert s[-1] < s[1]  # drops with depth
    assert s[-1] < s[0]
    assert lookup_similarity(bundled, a, b, "bank") == pytest.approx(1.0, abs=1e-12)
    same = word_similarity(a, analyze(bundled, BANK_RIVER), "bank")["cosine_similarity"]
    np.testing.assert_allclose(same, 1.0, atol=1e-6)


@pytest.mark.app
def test_page_defaults_to_the_bank_sentences(tiny_bert_dir):
    from tests.test_app import open_app, page_errors

    at = open_app({"model": tiny_bert_dir}, page="app_pages/compare.py")
    assert not page_errors(at)
    assert (at.text_area(key="compare.text_a").value, at.text_area(key="compare.text_b").value) == (BANK_RIVER, BANK_MONEY)
    assert at.selectbox(key="compare.word").value == "bank"
    assert at.selectbox(key="compare.word").options == ["i", "will", "bank", "a"]
    notes = " ".join(m.value for m in at.markdown)
    assert "is token 6 in A but token 9 in B" in notes
    assert len(at.get("plotly_chart")) == 5  # two heatmaps, two attention rows, the similarity curve


@pytest.mark.app
def test_page_reads_texts_and_word_from_the_url(tiny_gpt2_dir):
    from tests.test_app import open_app, page_errors

    at = open_app({"model": tiny_gpt2_dir, "text_a": "the cat sat", "text_b": "a cat was happy", "word": "cat"},
                  page="app_pages/compare.py")
    assert not page_errors(at)
    assert at.selectbox(key="compare.word").value == "cat"
    at.text_area(key="compare.text_b").set_value("home").run()
    assert not page_errors(at)
    assert any("no word in common" in i.value for i in at.info)


# --- the same-sense control ----------------------------------------------------------------


def test_control_sentence_reads_the_difference():
    from core.representations.compare import control_sentence

    text = control_sentence("bank", 0.729, 0.874, 6)
    assert "A vs B: 0.729" in text and "control text: 0.874" in text and "differ by 0.145 more" in text
    assert "about equal" in control_sentence("bank", 0.80, 0.81, 6)
    assert "more alike than A and the control" in control_sentence("bank", 0.9, 0.7, 6)


def test_chart_draws_the_control_beside_the_cross_curve():
    import pandas as pd

    from viz.compare import similarity_by_layer_chart

    cross = pd.DataFrame({"layer": [0, 1, 2], "cosine_similarity": [0.9, 0.8, 0.7]})
    control = cross.assign(cosine_similarity=[1.0, 0.95, 0.3])
    fig = similarity_by_layer_chart(cross, "bank", 1.0, control)
    assert [t.name for t in fig.data] == ["text A vs text B", "text A vs control (same sense)"]
    assert fig.layout.yaxis.range[0] <= 0.25  # the lower control curve is in view
    assert len(similarity_by_layer_chart(cross, "bank", 1.0).data) == 1


@pytest.mark.app
def test_page_draws_the_control_curve(tiny_bert_dir):
    from tests.test_app import open_app, page_errors

    at = open_app({"model": tiny_bert_dir}, page="app_pages/compare.py")
    assert not page_errors(at)
    assert at.text_area(key="compare.text_c").value == SAME_SENSE_CONTROL
    assert any("A vs the control text" in m.value for m in at.markdown)
    at.text_area(key="compare.text_c").set_value("a cat sat").run()
    assert not page_errors(at)
    assert any("not a word of the control text" in c.value for c in at.caption)


@pytest.mark.integration
def test_bundled_same_sense_control_stays_closer_than_the_other_sense(bundled):
    a, b, c = (analyze(bundled, t) for t in (BANK_RIVER, BANK_MONEY, SAME_SENSE_CONTROL))
    cross = word_similarity(a, b, "bank")["cosine_similarity"].to_numpy()
    control = word_similarity(a, c, "bank")["cosine_similarity"].to_numpy()
    assert control[-1] < 0.95  # a change of context alone lowers the cosine
    assert control[-1] > cross[-1] + 0.05
