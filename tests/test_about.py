"""core.teaching.about: the facts of the "About this model" panel, computed from the model."""

from __future__ import annotations

import numpy as np
import pytest

from core.model.inference import analyze, analyze_many
from core.teaching.about import (
    BUNDLED_DESCRIPTION,
    BUNDLED_LM_DESCRIPTION,
    ModelFacts,
    attention_received,
    even_share,
    facts_lines,
    model_facts,
    static_similarity_sentence,
    token_anisotropy,
)


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


def _even_by_hand(t: int, causal: bool) -> np.ndarray:
    """What each key receives, averaged over all t queries, when every query spreads evenly over what it sees."""
    a = np.zeros((t, t))
    for i in range(t):
        seen = range(i + 1) if causal else range(t)
        for j in seen:
            a[i, j] = 1 / len(seen)
    return a.mean(axis=0)


def test_even_share_matches_a_hand_computation():
    for t in (1, 2, 5, 10):
        np.testing.assert_allclose(even_share(t, True), _even_by_hand(t, True), atol=1e-12)
        np.testing.assert_allclose(even_share(t, False), _even_by_hand(t, False), atol=1e-12)
    harmonic = sum(1 / k for k in range(1, 11))
    assert even_share(10, True)[0] == pytest.approx(harmonic / 10)  # 0.293, issue 28's number, not 1/10
    assert even_share(7, True).sum() == pytest.approx(1.0)


def _hand_facts(received: np.ndarray, is_decoder: bool) -> ModelFacts:
    t = len(received)
    return ModelFacts(
        name="hand", model_type="gpt2", num_layers=1, num_heads=1, hidden_size=2, is_decoder=is_decoder,
        tokens=[f"t{i}" for i in range(t)], special_mask=np.zeros(t, bool), received=received,
        anisotropy=np.array([0.1, 0.1]), description=None,
    )


def test_even_causal_attention_is_no_sink():
    """Issue 28: under causal masking even attention gives position 0 H_T/T; that is no sink."""
    t = 10
    lines = facts_lines(_hand_facts(_even_by_hand(t, True), True))
    assert lines[-2].startswith("No attention sink on your text")
    assert "t0 (position 0), receives 0.29" in lines[-2] and "would give it 0.29" in lines[-2]
    sunk = _even_by_hand(t, True) * 0.5
    sunk[3] += 0.5  # half of everything onto token 3 (which only queries 3.. can see; a hand-made number)
    sink_line = facts_lines(_hand_facts(sunk, True))[-2]
    assert sink_line.startswith("Attention sink on your text: t3 (position 3)")
    assert f"would give it {_even_by_hand(t, True)[3]:.2f}" in sink_line


def test_facts_name_the_sink_and_the_decoder_rule(tiny_model):
    analysis = analyze(tiny_model, "the cat sat on the mat")
    facts = model_facts(tiny_model, analysis)
    lines = facts_lines(facts)
    even = _even_by_hand(analysis.num_tokens, tiny_model.is_decoder)
    sink = int(np.argmax(facts.received - even))
    comma = "" if facts.received[sink] >= 2 * even[sink] else ","
    assert f"{facts.tokens[sink]} (position {sink}){comma} receives {facts.received[sink]:.2f}" in lines[-2]
    assert f"{even[sink]:.2f})" in lines[-2]
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


def _tiny_llama_dir(folder, tokenizer_dir) -> str:
    """A random 2-layer Llama (4 query heads, 2 key/value heads) with the tiny GPT-2's tokenizer."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    LlamaModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def test_architecture_facts_are_read_from_each_model(tiny_bert, tiny_gpt2, tiny_gpt2_dir, tmp_path):
    from transformers import AutoConfig

    from core.model.models import load_model

    llama = load_model(_tiny_llama_dir(tmp_path / "llama", tiny_gpt2_dir))
    text = "a cat and the cat"  # " cat" twice: its hidden state 0 differs by position only with position embeddings
    for model, kv, rotary, norm in ((llama, 2, True, "RMSNorm"), (tiny_gpt2, None, False, "LayerNorm"), (tiny_bert, None, False, "LayerNorm")):
        analysis = analyze(model, text)
        facts = model_facts(model, analysis)
        ids = analysis.input_ids
        first, second = next((i, j) for i in range(len(ids)) for j in range(i + 1, len(ids)) if ids[i] == ids[j])
        same_start = np.array_equal(analysis.hidden_states[0, first], analysis.hidden_states[0, second])
        assert (facts.kv_heads, facts.rotary, facts.norm, facts.position_free_start) == (kv, rotary, norm, same_start)
    assert AutoConfig.from_pretrained(llama.source).num_key_value_heads == 2
    lines = facts_lines(model_facts(llama, analyze(llama, text)))
    assert "its 4 query heads share 2 key/value heads (2 query heads per key/value head)" in lines[1]
    assert "rotary embeddings (RoPE)" in lines[2] and "hidden state 0 is the token embedding alone" in lines[2]
    assert "Normalisation: RMSNorm (LlamaRMSNorm)" in lines[3]
    gpt2_lines = facts_lines(model_facts(tiny_gpt2, analyze(tiny_gpt2, text)))
    assert not any("key/value" in line or "rotary" in line for line in gpt2_lines)
    assert any("position (or segment) embeddings are added" in line for line in gpt2_lines)


@pytest.mark.integration
def test_bundled_lm_facts(bundled_lm):
    """SmolLM2: instruct-tuned, Q4_1 expanded to float32, 9 query heads over 3 key/value heads, RoPE, RMSNorm."""
    text = "I will hike along the bank of a river."
    analysis = analyze(bundled_lm, text)
    facts = model_facts(bundled_lm, analysis)
    lines = facts_lines(facts)
    assert BUNDLED_LM_DESCRIPTION in lines and "instruct-tuned" in BUNDLED_LM_DESCRIPTION and "Q4_1" in BUNDLED_LM_DESCRIPTION
    assert any("its 9 query heads share 3 key/value heads" in line for line in lines)
    assert any("hidden state 0 is the token embedding alone" in line for line in lines)
    assert any(line.startswith("Normalisation: RMSNorm") for line in lines)
    ids = bundled_lm.tokenizer(text, return_tensors="pt")["input_ids"]
    np.testing.assert_array_equal(  # no position embedding: hidden state 0 is the embedding table's rows
        analysis.hidden_states[0], bundled_lm.model.get_input_embeddings().weight[ids[0]].detach().numpy())
    even = _even_by_hand(analysis.num_tokens, True)
    sink = int(np.argmax(attention_received(analysis) - even))
    assert f"{facts.tokens[sink]} (position {sink})" in lines[-2]


def _hand_analysis(attentions: np.ndarray, special: list[bool]):
    from core.model.analysis import Analysis

    t = attentions.shape[-1]
    return Analysis(
        text="x" * t, model_name="hand", tokens=[f"t{i}" for i in range(t)], input_ids=list(range(t)),
        attentions=attentions.astype(np.float32), hidden_states=np.ones((attentions.shape[0] + 1, t, 2), np.float32),
        special_mask=np.array(special), word_ids=[None if s else i for i, s in enumerate(special)],
        offsets=[(i, i + 1) for i in range(t)], truncated=False, num_input_tokens=t, is_decoder=False,
    )


def test_neighbour_sink_sentence_is_computed_from_the_maxima():
    from core.teaching.about import neighbour_sink_sentence

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
    from core.teaching.about import special_share_sentence

    text = special_share_sentence(np.array([0.313, 0.563, 0.59]), np.array([0.123, 0.185, 0.163]))
    assert "31%–59% of raw attention and 12%–18% of norm-weighted attention across the 3 layers" in text
    assert special_share_sentence(np.array([np.nan]), np.array([np.nan])) == ""


def test_reference_anisotropy_is_computed_once_per_model(tiny_bert_dir, monkeypatch):
    import core.teaching.about as about
    from ui import results
    from ui.models import loaded_model, run_of

    computed = []
    original = about.reference_anisotropy
    monkeypatch.setattr(about, "reference_anisotropy", lambda model: computed.append(model.name) or original(model))
    results.reference_anisotropy.forget_at(run_of(tiny_bert_dir))
    first = results.model_facts(tiny_bert_dir, "the cat sat on the mat")
    second = results.model_facts(tiny_bert_dir, "a river bank in spring")
    assert len(computed) == 1, "the reference sentences went through the model again for a new text"
    assert first.tokens != second.tokens  # the text-dependent facts are the new text's
    np.testing.assert_array_equal(first.anisotropy, second.anisotropy)
    model = loaded_model(tiny_bert_dir)
    np.testing.assert_allclose(first.anisotropy, token_anisotropy(
        analyze_many(model, list(about.REFERENCE_SENTENCES), attentions=False)), atol=1e-6)
