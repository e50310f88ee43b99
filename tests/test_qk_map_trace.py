"""Queries and keys over a corpus read from the trace's recording pass stopped at the last layer asked for
(``core.model.trace_layers.pass_queries_keys``) against a plainly loaded eager model with ``output_attentions``, on tiny
random GPT-2, Llama, Qwen2 (grouped-query heads, q/k/v biases) and Gemma 3 (a 4-token sliding window, shorter than
the texts): each query's attention over its text's keys, computed from the map's queries and keys and mask, is the
plain model's, and the layers a pass stopped early recorded are those of a pass over every layer."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModel

from core.attention_heads.qk_map import query_key_map, record_corpus
from core.model.models import load_model
from tests.model_factory import build_tiny_causal_lm

# Texts of different lengths, so the batched pass pads some of them; the last batch holds one text (no padding).
TEXTS = ("The cat sat on the mat.", "I will hike along the bank of a river with my dog today.", "Paris is big.")


@pytest.fixture(scope="module", params=["gpt2", "llama", "qwen2", "gemma3_text"])
def family(request, tmp_path_factory):
    folder = build_tiny_causal_lm(tmp_path_factory.mktemp("qk") / request.param, request.param)
    return load_model(str(folder)), AutoModel.from_pretrained(folder, attn_implementation="eager").eval()


def test_every_querys_attention_on_the_map_is_the_plain_models(family):
    model, plain = family
    corpus = record_corpus(model, TEXTS, batch_size=2)
    assert sorted(corpus.layers) == list(range(model.num_layers))
    for text, words in enumerate(TEXTS):
        ids = model.tokenizer(words)["input_ids"]
        with torch.no_grad():
            eager = plain(torch.tensor([ids]), output_attentions=True).attentions
        start = int(corpus.starts[text])
        assert int(corpus.starts[text + 1]) - start == len(ids)
        for layer in range(model.num_layers):
            for head in range(model.num_heads):
                qmap = query_key_map(None, None, layer, head, corpus=corpus)
                expected = eager[layer][0, head].double().numpy()  # [T, T]
                for i in range(len(ids)):
                    keys, weights = qmap.attention(start + i)
                    np.testing.assert_array_equal(keys - start, np.flatnonzero(expected[i] > 0))
                    np.testing.assert_allclose(weights, expected[i, keys - start], atol=1e-5)


def test_a_pass_stopped_at_one_layer_records_what_the_whole_pass_does(family):
    model, _ = family
    whole = record_corpus(model, TEXTS, batch_size=2)
    for layer in range(model.num_layers):
        alone = record_corpus(model, TEXTS, layers={layer}, batch_size=2)
        assert sorted(alone.layers) == [layer]
        for name in ("queries", "keys", "keep"):
            np.testing.assert_allclose(getattr(alone.layers[layer], name), getattr(whole.layers[layer], name), atol=1e-6)
        for rotary in (True, False):
            for a, b in zip(alone.layers[layer].head(0, rotary=rotary), whole.layers[layer].head(0, rotary=rotary), strict=True):
                np.testing.assert_allclose(a, b, atol=1e-6)
