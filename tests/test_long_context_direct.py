"""Long context's shares computed from queries and keys (``core.attention_heads.distance_sums``, never through
``Trace.attention``) against a plain eager forward pass with ``output_attentions`` of tiny random decoders, reduced by
loops over every query and key: GPT-2, Llama, Qwen2 (grouped-query attention: 4 query heads on 2 key heads, q/k/v
biases) and Gemma 3 (a 4-token sliding window in layer 0), two sink positions, whole blocks and blocks of 1 and 3 rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, GPT2LMHeadModel

import core.attention_heads.distance_sums as distance_sums
from core.attention_heads.long_context import long_context_profile
from core.model.models import load_model
from core.model.trace import Trace, record
from tests.model_factory import build_tiny_decoder, build_tiny_gpt2

TEXT = ("I will hike along the bank of a river. The cat sat on the mat. It was happy to be home. I will open a new "
        "account at my bank and deposit some money.")
SINKS = (0, 3)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """family -> (LoadedModel, plain eager model)."""
    root = tmp_path_factory.mktemp("direct")
    found = {}
    folder = build_tiny_gpt2(root / "gpt2")
    found["gpt2"] = (load_model(str(folder)), GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager").eval())
    for family in ("llama", "qwen2", "gemma3_text"):
        folder = build_tiny_decoder(root / family, family)
        found[family] = (load_model(str(folder)),
                         AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval())
    return found


def _by_hand(plain, ids: list[int], far: int):
    """shares ``[L, H, B]`` (bin of distance d: 0, 1, 2–3, 4–7 …), sink ``[L, H, T]`` (on ``SINKS``), far ``[L, H]``
    (distance ≥ ``far``, ``SINKS`` excluded), each query's, averaged over queries 1 … T − 1, by loops."""
    with torch.no_grad():
        out = plain(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                    output_attentions=True)
    att = np.stack([a[0].double().numpy() for a in out.attentions])  # [L, H, T, T]
    layers, heads, t, _ = att.shape
    bins = int(np.floor(np.log2(t - 1))) + 2
    shares, far_share = np.zeros((layers, heads, bins)), np.zeros((layers, heads))
    for i in range(1, t):
        for j in range(i + 1):
            d = i - j
            shares[..., 0 if d == 0 else int(np.floor(np.log2(d))) + 1] += att[..., i, j]
            if d >= far and j not in SINKS:
                far_share += att[..., i, j]
    return shares / (t - 1), att[..., list(SINKS)].sum(axis=-1), far_share / (t - 1)


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen2", "gemma3_text"])
@pytest.mark.parametrize("rows", [None, 1, 3])
def test_direct_shares_equal_eager_weights_by_loops(models, family, rows, monkeypatch):
    model, plain = models[family]
    trace = record(model, TEXT)
    ids = list(trace.tokens("self").ids)
    assert len(ids) == 40 and ids == model.tokenizer(TEXT)["input_ids"]
    if rows is not None:
        monkeypatch.setattr(distance_sums, "DIRECT_BLOCK_CELLS", model.num_heads * rows * len(ids))

    def refused(*_args, **_kwargs):
        raise AssertionError("the shares of a causal layer are computed from its queries and keys")

    monkeypatch.setattr(Trace, "attention", refused)
    profile = long_context_profile(trace, sink_positions=SINKS)
    if family == "gemma3_text":
        assert profile.windows == (4, None) and profile.far_distance == 4
    shares, sink, far = _by_hand(plain, ids, profile.far_distance)
    np.testing.assert_allclose(profile.shares, shares, atol=2e-6)
    np.testing.assert_allclose(profile.sink[..., 1:], sink[..., 1:], atol=2e-6)
    np.testing.assert_allclose(profile.far, far, atol=2e-6)
    assert np.isnan(profile.sink[..., 0]).all()

