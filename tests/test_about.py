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


def _hand_analysis(attentions: np.ndarray, special: list[bool]):
    from core.inference import Analysis

    t = attentions.shape[-1]
    return Analysis(
        text="x" * t, model_name="hand", tokens=[f"t{i}" for i in range(t)], input_ids=list(range(t)),
        attentions=attentions.astype(np.float32), hidden_states=np.ones((attentions.shape[0] + 1, t, 2), np.float32),
        special_mask=np.array(special), word_ids=[None if s else i for i, s in enumerate(special)],
        offsets=[(i, i + 1) for i in range(t)], truncated=False, num_input_tokens=t, is_decoder=False,
    )


def test_neighbour_sink_sentence_is_computed_from_the_maxima():
    from core.about import neighbour_sink_sentence

    t = 6
    early = np.zeros((t, t))
    for i in range(t):
        early[i, max(0, i - 1)] = 1.0  # every token looks at its left neighbour
    late = np.zeros((t, t))
    late[:, 0] = 0.7  # token 0 ([CLS]-like) is the sink ...
    late[:, 3] = 0.3  # ... and with it left out, everyone looks at token 3 (3 of 5 within one position)
    analysis = _hand_analysis(np.stack([early, late])[:, None], [True, False, False, False, False, False])
    text = neighbour_sink_sentence(analysis)
    assert "100% of tokens attend most to themselves or a neighbour in layer 0 and 60% in layer 1" in text
    assert "0% attend most to a special token in layer 0 and 100% in layer 1" in text
    assert "as Clark et al. (2019) found" in text
    reversed_ = _hand_analysis(np.stack([late, early])[:, None], analysis.special_mask.tolist())
    assert "does not show clearly" in neighbour_sink_sentence(reversed_)
    assert neighbour_sink_sentence(_hand_analysis(np.stack([early])[:, None], [True] * t)) == ""


def test_special_share_sentence_gives_the_ranges():
    from core.about import special_share_sentence

    text = special_share_sentence(np.array([0.313, 0.563, 0.59]), np.array([0.123, 0.185, 0.163]))
    assert "31%–59% of raw attention and 12%–18% of norm-weighted attention across the 3 layers" in text
    assert special_share_sentence(np.array([np.nan]), np.array([np.nan])) == ""


def test_reference_anisotropy_is_computed_once_per_model(tiny_bert_dir, monkeypatch):
    import core.about as about
    from ui import cache

    computed = []
    original = about.reference_anisotropy
    monkeypatch.setattr(about, "reference_anisotropy", lambda model: computed.append(model.name) or original(model))
    cache.bounded_store("reference-anisotropy", cache.MAX_MODELS, 1_000_000).clear()
    first = cache.cached_model_facts(tiny_bert_dir, "the cat sat on the mat", None)
    second = cache.cached_model_facts(tiny_bert_dir, "a river bank in spring", None)
    assert len(computed) == 1, "the reference sentences went through the model again for a new text"
    assert first.tokens != second.tokens  # the text-dependent facts are the new text's
    np.testing.assert_array_equal(first.anisotropy, second.anisotropy)
    model = cache.cached_model(tiny_bert_dir)
    np.testing.assert_allclose(first.anisotropy, token_anisotropy(
        analyze_many(model, list(about.REFERENCE_SENTENCES), attentions=False)), atol=1e-6)
