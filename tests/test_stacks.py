"""core.model.stacks: one contract for the blocks of any model, checked against a plainly loaded transformers model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoModelForSeq2SeqLM, AutoTokenizer

from core.model.inference import analyze, analyze_many
from core.model.seq2seq import analyze_pair
from core.model.stacks import stack_of, stacks_of

SOURCE = "I will hike along the bank of a river."
TARGET = "the cat sat on the mat"


def _plain_pair(folder: str):
    """encoder, decoder and cross attentions ``[L, H, ·, ·]`` of an eager model loaded here, decoder input by hand."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()
    labels = tokenizer(text_target=TARGET)["input_ids"]
    decoder_input = [model.config.decoder_start_token_id] + labels[:-1]
    with torch.no_grad():
        out = model(**tokenizer(SOURCE, return_tensors="pt"), decoder_input_ids=torch.tensor([decoder_input]),
                    output_attentions=True)
    return {name: torch.cat(getattr(out, f"{name}_attentions")).numpy() for name in ("encoder", "decoder", "cross")}


def test_an_encoder_decoder_has_three_stacks_equal_to_the_model_s_own_attention(tiny_seq2seq):
    pair = analyze_pair(tiny_seq2seq, SOURCE, TARGET)
    plain = _plain_pair(tiny_seq2seq.source)
    stacks = stacks_of(pair)
    assert [s.kind for s in stacks] == ["encoder", "decoder", "cross"]
    assert [s.causal for s in stacks] == [False, True, False]
    assert [s.is_cross for s in stacks] == [False, False, True]
    s, t = len(pair.source.tokens), len(pair.target.tokens)
    for stack in stacks:
        expected = plain[stack.kind]
        assert (stack.num_layers, stack.num_heads) == expected.shape[:2]
        assert (stack.num_query_tokens, stack.num_key_tokens) == {"encoder": (s, s), "decoder": (t, t), "cross": (t, s)}[stack.kind]
        for layer in range(stack.num_layers):
            np.testing.assert_allclose(stack.weights(layer), expected[layer], rtol=0, atol=1e-6)
            np.testing.assert_allclose(stack.weights(layer, [1]), expected[layer, [1]], rtol=0, atol=1e-6)
        # the same recorded pass: one record per layer, with the stack's query and key lengths
        assert sorted(stack.records) == list(range(stack.num_layers))
        record = stack.records[0]
        assert (record.queries.shape[2], record.keys.shape[2]) == (stack.num_query_tokens, stack.num_key_tokens)


def test_a_one_stack_model_has_one_self_stack_stored_or_on_demand(tiny_gpt2):
    folder = tiny_gpt2.source
    tokenizer = AutoTokenizer.from_pretrained(folder)
    plain = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        expected = torch.cat(plain(**tokenizer(SOURCE, return_tensors="pt"), output_attentions=True).attentions).numpy()
    for on_demand in (False, True):
        (stack,) = stacks_of(analyze(tiny_gpt2, SOURCE, on_demand=on_demand))
        assert (stack.kind, stack.label, stack.causal, stack.is_cross) == ("self", "Self-attention", True, False)
        assert (stack.attentions is None) == on_demand
        assert (stack.num_layers, stack.num_heads, stack.num_query_tokens) == expected.shape[:3]
        for layer in range(stack.num_layers):
            np.testing.assert_allclose(stack.weights(layer), expected[layer], rtol=0, atol=1e-5)


def test_asking_for_a_stack_the_model_lacks_names_the_ones_it_has(tiny_bert):
    analysis = analyze(tiny_bert, SOURCE)
    assert stack_of(analysis, "self").queries is analysis
    with pytest.raises(ValueError, match="'self'"):
        stack_of(analysis, "cross")
    with pytest.raises(ValueError, match="layer must be in 0..1"):
        stack_of(analysis, "self").weights(2)


def test_a_stack_without_weights_or_trace_says_so(tiny_gpt2):
    [analysis] = analyze_many(tiny_gpt2, [SOURCE], attentions=False)  # a batch pass: no weights, no trace
    (stack,) = stacks_of(analysis)
    with pytest.raises(ValueError, match="computed without attentions"):
        stack.weights(0)
