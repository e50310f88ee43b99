"""Attention on demand for long texts (issue 41, read from the text's trace since issue 48):
``core.attention_heads.attention.head_attention`` equals the model's own weights.

The reference is always a plain eager forward pass with ``output_attentions=True`` on a model loaded without the
app's recording implementation (``attn_implementation="eager"``), never the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

import core.model.trace as trace
from core.attention_heads.attention import head_attention, layer_attention
from core.attention_heads.retrieval import bundled_haystack
from core.model.inference import STORED_ATTENTION_MAX_TOKENS, analyze
from core.model.models import load_model
from core.model.on_demand import StoredMask, to_stored
from tests.model_factory import build_tiny_decoder, build_tiny_gpt2

TEXT = "the cat sat on the mat and the dog ran after it while the bird sang " * 3


def plain_attentions(folder, input_ids: list[int]) -> list[np.ndarray]:
    """Each layer's ``[Hq, T, T]`` from a plain eager forward pass of the model saved in ``folder``."""
    plain = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    ids = torch.tensor([input_ids])
    with torch.no_grad():
        out = plain(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True)
    return [a[0].float().numpy() for a in out.attentions]


# Llama: plain grouped-query heads; Mistral: one sliding window for every layer (4 tokens, shorter than the text);
# Gemma 2: a window and a soft-cap; Gemma 3: a local and a global layer with q/k-norm and two rotary tables; Phi-3: fused
# q/k/v and half the dimensions rotated. All share 2 key/value heads among 4 query heads. GPT-2: absolute positions,
# one key/value head per query head, another block signature.
@pytest.fixture(scope="module", params=["llama", "mistral", "gemma2", "gemma3_text", "phi3", "gpt2"])
def tiny_windowed(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("long") / request.param
    folder = build_tiny_gpt2(folder) if request.param == "gpt2" else build_tiny_decoder(folder, request.param)
    return folder, load_model(str(folder))


def test_on_demand_weights_equal_the_models_own(tiny_windowed, monkeypatch):
    folder, model = tiny_windowed
    # the weights in blocks of a few query rows, as for a long text
    monkeypatch.setattr(trace, "BLOCK_CELLS", 300)
    analysis = analyze(model, TEXT, on_demand=True)
    assert analysis.attentions is None and analysis.trace is not None
    reference = plain_attentions(folder, analysis.input_ids)
    assert analysis.num_heads == reference[0].shape[0] == 4
    for layer, expected in enumerate(reference):
        for head in range(analysis.num_heads):
            got = head_attention(model, analysis, layer, head)
            assert got.dtype == np.float32 and got.shape == (analysis.num_tokens, analysis.num_tokens)
            np.testing.assert_allclose(got, expected[head], atol=2e-6)
    # the windowed layers really hide far keys (the comparison above would pass on a model without windows otherwise)
    last = analysis.num_tokens - 1
    if analysis.sliding_windows is not None:
        assert any(reference[layer][0, last, 0] == 0.0 for layer in range(len(reference)))
    # and the hidden states are the plain model's, the last after its final norm (transformers' hidden_states[-1])
    plain = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        out = plain(input_ids=torch.tensor([analysis.input_ids]), output_hidden_states=True)
    np.testing.assert_allclose(analysis.hidden_states, np.stack([h[0].numpy() for h in out.hidden_states]), atol=2e-5)
    stored = analyze(model, TEXT, on_demand=False)
    np.testing.assert_allclose(stored.attentions, np.stack(reference), atol=2e-6)


def test_short_texts_keep_stored_weights_and_head_attention_reads_them(tiny_windowed):
    folder, model = tiny_windowed
    analysis = analyze(model, TEXT)  # far under STORED_ATTENTION_MAX_TOKENS
    assert analysis.attentions is not None
    reference = plain_attentions(folder, analysis.input_ids)
    np.testing.assert_allclose(head_attention(model, analysis, 1, 3), reference[1][3], atol=2e-6)
    np.testing.assert_allclose(layer_attention(model, analysis, 0), reference[0], atol=2e-6)


def test_a_restored_mask_is_the_tensor_the_pass_made():
    t = 40
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    additive = torch.zeros(1, 1, t, t).masked_fill(~causal, torch.finfo(torch.float32).min)
    kept = to_stored(additive)
    assert isinstance(kept, StoredMask) and kept.allowed.dtype == np.bool_
    assert torch.equal(kept.restore(), additive)
    kept = to_stored(causal[None, None])
    assert isinstance(kept, StoredMask) and torch.equal(kept.restore(), causal[None, None])
    rotary = torch.linspace(-1, 1, 64 * t).reshape(1, t, 64)  # not a mask: kept as it is
    assert to_stored(rotary) is not None and torch.equal(to_stored(rotary), rotary)


def test_head_attention_refuses_a_head_that_does_not_exist(tiny_windowed):
    _, model = tiny_windowed
    analysis = analyze(model, TEXT, on_demand=True)
    with pytest.raises(ValueError, match="head must be in 0..3"):
        head_attention(model, analysis, 0, 4)


@pytest.mark.integration
def test_smollm2_on_demand_weights_at_1024_tokens_equal_a_plain_eager_pass(bundled_lm):
    """1,024 tokens of SmolLM2-135M: above the stored size, so computed on demand; compared with a plain eager pass of
    the same checkpoint (its own attention, output_attentions=True), layers 0 and 29, a few heads."""
    analysis = analyze(bundled_lm, bundled_haystack(), max_tokens=1024)
    assert analysis.num_tokens == 1024 > STORED_ATTENTION_MAX_TOKENS and analysis.attentions is None
    ids = torch.tensor([analysis.input_ids])
    plain = AutoModelForCausalLM.from_pretrained(bundled_lm.source, attn_implementation="eager").eval()
    with torch.no_grad():
        out = plain(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True, use_cache=False)
    for layer, heads in ((0, [0, 4]), (29, [2, 8])):
        for head in heads:
            np.testing.assert_allclose(head_attention(bundled_lm, analysis, layer, head),
                                       out.attentions[layer][0, head].numpy(), atol=1e-5)
