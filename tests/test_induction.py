"""Induction scores recomputed from the returned tokens and the model's own attention weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.attention_heads.induction import induction_scores
from tests.lm_factory import tiny_lm  # noqa: F401 (fixture)


def test_scores_from_the_returned_tokens(tiny_lm):
    result = induction_scores(tiny_lm, length=12, seed=4)
    ids = result.token_ids
    bos = tiny_lm.tokenizer.bos_token_id
    assert ids[0] == bos and len(ids) == 1 + 24
    first, second = ids[1:13], ids[13:]
    assert first.tolist() == second.tolist() and len(set(first.tolist())) == 12
    assert not set(first.tolist()) & set(tiny_lm.tokenizer.all_special_ids)
    with torch.no_grad():
        attentions = tiny_lm.model(input_ids=torch.tensor(ids)[None], output_attentions=True).attentions
    layers, heads = len(attentions), attentions[0].shape[1]
    expected = np.zeros((layers, heads))
    for layer in range(layers):
        for head in range(heads):
            weights = attentions[layer][0, head].double()
            # query at 1 + 12 + j (token first[j] again) -> key 1 + j + 1 (what followed first[j])
            expected[layer, head] = np.mean([float(weights[13 + j, 2 + j]) for j in range(12)])
    np.testing.assert_allclose(result.scores, expected, atol=1e-6)
    assert result.scores.shape == (layers, heads)
    again = induction_scores(tiny_lm, length=12, seed=4)
    assert again.token_ids.tolist() == ids.tolist()
    assert induction_scores(tiny_lm, length=12, seed=5).token_ids.tolist() != ids.tolist()


def test_works_on_the_base_model_too(tiny_gpt2):
    result = induction_scores(tiny_gpt2, length=8)
    assert result.scores.shape == (tiny_gpt2.num_layers, tiny_gpt2.num_heads)
    assert np.all((result.scores >= 0) & (result.scores <= 1))


def test_repeat_loss_and_knock_out_by_hand(tiny_lm):
    from core.attention_heads.induction import repeat_loss

    scores = induction_scores(tiny_lm, length=10, seed=2)
    ids = torch.tensor(scores.token_ids)[None]
    with torch.no_grad():
        logp = tiny_lm.model(input_ids=ids).logits[0].double().log_softmax(-1)
    by_hand = [-float(logp[i, ids[0, i + 1]]) for i in range(len(ids[0]) - 1)]
    plain = repeat_loss(tiny_lm, scores)
    assert plain.first == pytest.approx(np.mean(by_hand[1:10]), abs=1e-6)  # predicting tokens 2..10
    assert plain.second == pytest.approx(np.mean(by_hand[11:20]), abs=1e-6)  # predicting tokens 12..20
    # knocking out head 1 of layer 0 by hand: zero its slice of the output projection's input
    llama = hasattr(tiny_lm.model, "model")
    block = (tiny_lm.model.model.layers if llama else tiny_lm.model.transformer.h)[0]
    projection = block.self_attn.o_proj if llama else block.attn.c_proj
    width = tiny_lm.model.config.hidden_size // tiny_lm.model.config.num_attention_heads

    def zero(module, args):
        x = args[0].clone()
        x[..., width:2 * width] = 0
        return (x,)
    handle = projection.register_forward_pre_hook(zero)
    try:
        with torch.no_grad():
            logp = tiny_lm.model(input_ids=ids).logits[0].double().log_softmax(-1)
    finally:
        handle.remove()
    knocked = repeat_loss(tiny_lm, scores, [(0, 1)])
    assert knocked.second == pytest.approx(np.mean([-float(logp[i, ids[0, i + 1]]) for i in range(11, 20)]), abs=1e-6)
    assert knocked.second != pytest.approx(plain.second, abs=1e-9)
