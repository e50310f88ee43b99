"""Direct logit attribution: one head's share by hand from the weights, and the parts adding up to the logits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.causal.logit_attribution import direct_logit_attribution
from tests.lm_factory import tiny_lm  # noqa: F401 (fixture)

TEXT, ANSWER, WRONG = "I will hike along the bank of a", " river", " home"


def _one(lm, token):
    (i,) = lm.tokenizer(token, add_special_tokens=False)["input_ids"]
    return i


def test_parts_add_up_to_the_models_own_logit_difference(tiny_lm):
    result = direct_logit_attribution(tiny_lm, TEXT, ANSWER, WRONG)
    ids = tiny_lm.tokenizer(TEXT, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = tiny_lm.model(input_ids=ids).logits[0, -1].double()
    own = float(logits[_one(tiny_lm, ANSWER)] - logits[_one(tiny_lm, WRONG)])
    assert result.total == pytest.approx(own, abs=1e-6)
    parts = result.heads.sum() + result.mlps.sum() + result.embeddings + result.biases
    assert parts == pytest.approx(own, abs=1e-4)
    config = tiny_lm.model.config
    assert result.heads.shape == (config.num_hidden_layers, config.num_attention_heads)
    assert result.mlps.shape == (config.num_hidden_layers,)
    alone = direct_logit_attribution(tiny_lm, TEXT, ANSWER)  # no wrong token: logit(answer) itself
    assert alone.total == pytest.approx(float(logits[_one(tiny_lm, ANSWER)]), abs=1e-6)


def test_one_heads_attribution_by_hand(tiny_lm):
    lm = tiny_lm
    config = lm.model.config
    llama = hasattr(lm.model, "model")
    base = lm.model.model if llama else lm.model.transformer
    blocks = base.layers if llama else base.h
    final_norm = base.norm if llama else base.ln_f
    layer, head = 1, 2
    width = config.hidden_size // config.num_attention_heads
    projection = blocks[layer].self_attn.o_proj if llama else blocks[layer].attn.c_proj
    store = {}
    handles = [projection.register_forward_pre_hook(lambda m, a: store.update(z=a[0][0, -1].clone())),
               final_norm.register_forward_pre_hook(lambda m, a: store.update(x=a[0][0, -1].clone()))]
    with torch.no_grad():
        lm.model(input_ids=lm.tokenizer(TEXT, return_tensors="pt")["input_ids"])
    for handle in handles:
        handle.remove()
    z = store["z"][head * width:(head + 1) * width].double()
    x = store["x"].double()
    weight = projection.weight.detach().double()
    if llama:  # Linear: out = W z, W [hidden, heads * width]; RMSNorm: gain * c / rms(x)
        c = weight[:, head * width:(head + 1) * width] @ z
        through = final_norm.weight.detach().double() * c / torch.sqrt((x**2).mean() + config.rms_norm_eps)
    else:  # Conv1D: out = z W, W [heads * width, hidden]; LayerNorm: w * (c - mean c) / std(x)
        c = z @ weight[head * width:(head + 1) * width]
        through = final_norm.weight.detach().double() * (c - c.mean()) / torch.sqrt(x.var(unbiased=False) + final_norm.eps)
    unembed = lm.model.get_output_embeddings().weight.detach().double()
    expected = float(through @ (unembed[_one(lm, ANSWER)] - unembed[_one(lm, WRONG)]))
    result = direct_logit_attribution(lm, TEXT, ANSWER, WRONG)
    assert result.heads[layer, head] == pytest.approx(expected, abs=1e-6)
    assert not np.allclose(result.heads, result.heads[0, 0])  # heads differ: nothing broadcast by mistake
