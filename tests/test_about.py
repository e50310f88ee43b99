"""core.about: the facts of the "About this model" panel, computed from the model."""

from __future__ import annotations

import numpy as np
import pytest

from core.about import (
    BUNDLED_DESCRIPTION,
    attention_received,
    facts_lines,
    model_facts,
    static_similarity_sentence,
    token_anisotropy,
)
from core.inference import analyze, analyze_many


def test_attention_received_is_the_mean_over_layers_heads_and_queries(tiny_model):
    analysis = analyze(tiny_model, "the cat sat on the mat")
    received = attention_received(analysis)
    t = analysis.num_tokens
    direct = [
        np.mean([analysis.attentions[l, h, q, k] for l in range(analysis.num_layers) for h in range(analysis.num_heads) for q in range(t)])
        for k in range(t)
    ]
    np.testing.assert_allclose(received, direct, atol=1e-6)
    assert received.sum() == pytest.approx(1.0, abs=1e-5)


def test_token_anisotropy_against_pairs(tiny_bert):
    analyses = analyze_many(tiny_bert, ["the cat sat", "a river bank"], attentions=False)
    a, b = (x.hidden_states[:, ~x.special_mask] for x in analyses)
    last = [float(u @ v / np.linalg.norm(u) / np.linalg.norm(v)) for u in a[-1] for v in b[-1]]
    assert token_anisotropy(analyses)[-1] == pytest.approx(np.mean(last), abs=1e-6)


def test_facts_name_the_sink_and_the_decoder_rule(tiny_model):
    analysis = analyze(tiny_model, "the cat sat on the mat")
    facts = model_facts(tiny_model, analysis)
    lines = facts_lines(facts)
    sink = int(np.argmax(facts.received))
    assert f"{facts.tokens[sink]} (position {sink}) receives {facts.received[sink]:.2f}" in lines[-2]
    if tiny_model.is_decoder:
        assert "sees itself and the tokens before it" in lines[0]
    assert f"{facts.anisotropy[-1]:.2f} at hidden state {tiny_model.num_layers}, the last" in lines[-1]
    assert facts.description is None and BUNDLED_DESCRIPTION not in lines  # a tiny model is not the bundled checkpoint


def test_static_similarity_sentence_uses_text_tokens():
    similarity = np.array([[1.0, 1.0, 1.0], [0.2, 0.5, 0.9], [0.1, 0.7, 0.3]])
    text = static_similarity_sentence(similarity, np.array([True, False, False]))
    assert "0.50 at hidden state 2, the last" in text and "lowest at hidden state 2" not in text
    assert "lowest at hidden state 1 (0.50)" in static_similarity_sentence(similarity[:, 1:][[0, 2, 1]], np.array([False, False]))


@pytest.mark.integration
def test_bundled_model_facts(bundled):
    """[CLS] is the bundled model's main sink and [SEP] a minor one; its last layer is nearly isotropic."""
    facts = model_facts(bundled, analyze(bundled, "I will hike along the bank of a river."))
    assert facts.tokens[int(np.argmax(facts.received))] == "[CLS]"
    assert 0.3 < facts.received[0] < 0.6
    sep = facts.received[facts.tokens.index("[SEP]")]
    assert sep < 0.1
    assert facts.anisotropy[-1] < 0.2
    lines = facts_lines(facts)
    assert BUNDLED_DESCRIPTION in lines and "nearly isotropic" in lines[-1] and "[SEP] to be BERT-base's main sink" in lines[-2]
