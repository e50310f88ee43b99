"""Induction scores recomputed from the returned tokens and the model's own attention weights."""

from __future__ import annotations

import numpy as np
import torch

from core.head_stats import induction_scores
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
