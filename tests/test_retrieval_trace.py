"""Needle's scoring read from the haystack prompt's trace (``core.model.trace.record_ids``, ``Trace.attention``
for the answer's rows) against a plainly loaded eager causal LM with ``output_attentions``, on tiny random GPT-2,
Llama, Qwen2 (grouped-query heads, q/k/v biases) and Gemma 3 (a 4-token sliding window, shorter than the prompt)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from core.attention_heads.retrieval import build_prompt, retrieval_scores
from core.model.attention_layers import SINGLE_STACK
from core.model.models import load_model
from core.model.trace import record_ids
from core.outputs.predictions import load_language_model
from tests.model_factory import build_tiny_causal_lm

HAYSTACK = "The sun rose. A dog ran. The cat sat. A bird sang in the tree."
NEEDLE = "The code is cat mat."
QUESTION = "Code?"
ANSWER = " cat mat"


@pytest.fixture(scope="module", params=["gpt2", "llama", "qwen2", "gemma3_text"])
def family(request, tmp_path_factory):
    folder = build_tiny_causal_lm(tmp_path_factory.mktemp("needle") / request.param, request.param)
    loaded = load_model(str(folder))
    plain = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    return request.param, loaded, load_language_model(loaded), plain


def _plain(plain, ids):
    with torch.no_grad():
        return plain(torch.tensor([ids]), output_attentions=True)


@pytest.mark.parametrize("depth", [0.0, 0.5])
def test_the_answer_rows_weights_and_log_probabilities_equal_the_plain_models(family, depth):
    name, loaded, lm, plain = family
    prompt = build_prompt(lm.tokenizer, HAYSTACK, NEEDLE, QUESTION, ANSWER, depth)
    ids = prompt.token_ids
    if name == "gemma3_text":
        assert len(ids) > 8  # past the 4-token window, so the sliding layer's mask matters
    rows = list(range(prompt.answer_span[0] - 1, prompt.answer_span[1] - 1))
    trace = record_ids(loaded, ids)
    assert list(trace.tokens(SINGLE_STACK).ids) == ids
    out = _plain(plain, ids)
    for layer, eager in enumerate(out.attentions):
        expected = eager[0][:, rows].numpy()
        np.testing.assert_allclose(trace.attention(SINGLE_STACK, layer, rows=rows), expected, atol=1e-5)
    result = retrieval_scores(lm, HAYSTACK, NEEDLE, QUESTION, ANSWER, depth)
    assert result.token_ids == ids
    targets = np.asarray(ids[prompt.answer_span[0]:prompt.answer_span[1]])
    copyable = np.isin(targets, ids[prompt.needle_span[0]:prompt.needle_span[1]])
    for layer, eager in enumerate(out.attentions):
        top = eager[0][:, rows].numpy().argmax(-1)  # [H, A]
        inside = (top >= prompt.needle_span[0]) & (top < prompt.needle_span[1])
        np.testing.assert_array_equal(result.copies[layer], inside & (np.asarray(ids)[top] == targets) & copyable)
    log_probs = torch.log_softmax(out.logits[0].double(), -1)
    expected_log_p = float(sum(log_probs[r, ids[r + 1]] for r in rows))
    assert result.answer_log_probability == pytest.approx(expected_log_p, abs=1e-4)



@pytest.mark.integration
def test_on_smollm2_the_scores_and_answer_rows_equal_the_plain_eager_models(bundled_lm):
    from core.attention_heads.retrieval import DEFAULT_ANSWER, DEFAULT_NEEDLE, DEFAULT_QUESTION, bundled_haystack, haystack_of_length

    lm = load_language_model(bundled_lm)
    haystack = haystack_of_length(lm.tokenizer, bundled_haystack(), 256)
    result = retrieval_scores(lm, haystack, DEFAULT_NEEDLE, DEFAULT_QUESTION, DEFAULT_ANSWER, 0.5)
    ids, (start, end) = result.token_ids, result.answer_span
    rows = list(range(start - 1, end - 1))
    plain = AutoModelForCausalLM.from_pretrained(bundled_lm.source, attn_implementation="eager").eval()
    out = _plain(plain, ids)
    trace = record_ids(bundled_lm, ids)
    targets = np.asarray(ids[start:end])
    for layer, eager in enumerate(out.attentions):
        expected = eager[0][:, rows].numpy()
        np.testing.assert_allclose(trace.attention(SINGLE_STACK, layer, rows=rows), expected, atol=1e-5)
        top = expected.argmax(-1)
        inside = (top >= result.needle_span[0]) & (top < result.needle_span[1])
        np.testing.assert_array_equal(result.copies[layer], inside & (np.asarray(ids)[top] == targets) & result.copyable)
    log_probs = torch.log_softmax(out.logits[0].double(), -1)
    assert result.answer_log_probability == pytest.approx(float(sum(log_probs[r, ids[r + 1]] for r in rows)), abs=1e-4)
