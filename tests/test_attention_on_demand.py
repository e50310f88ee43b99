"""Attention on demand for long texts (issue 41): ``core.attention.head_attention`` equals the model's own weights.

The reference is always a plain eager forward pass with ``output_attentions=True`` on a model loaded without the
app's recording implementation (``attn_implementation="eager"``), never the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

import core.inference as inference
from core.attention import head_attention, layer_attention
from core.inference import STORED_ATTENTION_MAX_TOKENS, analyze
from core.models import load_model
from core.retrieval import bundled_haystack
from tests.model_factory import build_tiny_decoder
from ui.bounded_cache import nbytes_of

TEXT = "the cat sat on the mat and the dog ran after it while the bird sang " * 3


def plain_attentions(folder, input_ids: list[int]) -> list[np.ndarray]:
    """Each layer's ``[Hq, T, T]`` from a plain eager forward pass of the model saved in ``folder``."""
    plain = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    ids = torch.tensor([input_ids])
    with torch.no_grad():
        out = plain(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True)
    return [a[0].float().numpy() for a in out.attentions]


# Mistral: one sliding window for every layer (4 tokens, shorter than the text); Gemma 2: a window and a soft-cap;
# Gemma 3: a local and a global layer with q/k-norm. All share 2 key/value heads among 4 query heads.
@pytest.fixture(scope="module", params=["mistral", "gemma2", "gemma3_text"])
def tiny_windowed(request, tmp_path_factory):
    folder = build_tiny_decoder(tmp_path_factory.mktemp("long") / request.param, request.param)
    return folder, load_model(str(folder))


def test_on_demand_weights_equal_the_models_own(tiny_windowed, monkeypatch):
    folder, model = tiny_windowed
    # rows in blocks of 5: the pass runs each layer's attention in pieces, as it does for a long text
    monkeypatch.setattr(inference, "QUERY_ROWS_PER_CHUNK", 5)
    analysis = analyze(model, TEXT, on_demand=True)
    assert analysis.attentions is None and analysis.on_demand is not None
    reference = plain_attentions(folder, analysis.input_ids)
    assert analysis.num_heads == reference[0].shape[0] == 4
    for layer, expected in enumerate(reference):
        for head in range(analysis.num_heads):
            got = head_attention(model, analysis, layer, head)
            assert got.dtype == np.float32 and got.shape == (analysis.num_tokens, analysis.num_tokens)
            np.testing.assert_allclose(got, expected[head], atol=2e-6)
    # the windowed layers really hide far keys (the comparison above would pass on a model without windows otherwise)
    last = analysis.num_tokens - 1
    assert any(reference[layer][0, last, 0] == 0.0 for layer in range(len(reference)))
    # and the hidden states are those of the model, run in pieces or not
    whole = analyze(model, TEXT, on_demand=False)
    np.testing.assert_allclose(analysis.hidden_states, whole.hidden_states, atol=2e-5)


def test_short_texts_keep_stored_weights_and_head_attention_reads_them(tiny_windowed):
    folder, model = tiny_windowed
    analysis = analyze(model, TEXT)  # far under STORED_ATTENTION_MAX_TOKENS
    assert analysis.on_demand is None and analysis.attentions is not None
    reference = plain_attentions(folder, analysis.input_ids)
    np.testing.assert_allclose(head_attention(model, analysis, 1, 3), reference[1][3], atol=2e-6)
    np.testing.assert_allclose(layer_attention(model, analysis, 0), reference[0], atol=2e-6)


def test_a_long_analysis_holds_queries_and_keys_not_every_heads_weights(tiny_windowed):
    _, model = tiny_windowed
    analysis = analyze(model, TEXT, on_demand=True)
    t, stored = analysis.num_tokens, analysis.on_demand
    config = model.model.config
    head_size = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    for queries, keys in zip(stored.queries, stored.keys, strict=True):
        assert queries.shape == (config.num_attention_heads, t, head_size)
        assert keys.shape == (config.num_key_value_heads, t, head_size)
        assert not queries.flags.writeable and not keys.flags.writeable
    assert len(stored.masks) <= 2  # one per kind of layer (full, sliding), shared by the layers
    # no array of the analysis is as big as one layer's weights [Hq, T, T]
    biggest = max(a.size for a in (*stored.queries, *stored.keys, *stored.masks, analysis.hidden_states[0]))
    assert biggest < config.num_attention_heads * t * t
    # the caches bound analyses by bytes: the queries and keys count (by their shapes: L × (Hq + Hkv) × T × d floats)
    expected = 4 * config.num_hidden_layers * (config.num_attention_heads + config.num_key_value_heads) * t * head_size
    masks = sum(m.nbytes for m in stored.masks)
    assert nbytes_of(analysis) == expected + masks + analysis.hidden_states.nbytes + analysis.special_mask.nbytes


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
