"""Attention rollout and norm-weighted attention, against hand computation and the models' own weights."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from core.attention_heads.attention import norm_weighted, rollout
from core.model.analysis import Analysis
from core.model.inference import analyze
from core.model.recording import UnsupportedArchitecture

TEXT = "I will hike along the bank of a river."


def hand_analysis(attentions, tokens: list[str], special: list[bool] | None = None) -> Analysis:
    """An ``Analysis`` around a hand-made ``attentions`` ``[layers, heads, T, T]``; words are the non-special tokens."""
    attentions = np.asarray(attentions, dtype=np.float32)
    layers, t = attentions.shape[0], len(tokens)
    special = [False] * t if special is None else special
    text, offsets, word_ids, word = "", [], [], 0
    for token, is_special in zip(tokens, special):
        if is_special:
            offsets.append((0, 0))
            word_ids.append(None)
            continue
        text += " " if text else ""
        offsets.append((len(text), len(text) + len(token)))
        word_ids.append(word)
        word += 1
        text += token
    return Analysis(
        text=text,
        model_name="hand-made",
        tokens=list(tokens),
        input_ids=list(range(t)),
        attentions=attentions,
        hidden_states=np.zeros((layers + 1, t, 4), dtype=np.float32),
        special_mask=np.array(special, dtype=bool),
        word_ids=word_ids,
        offsets=offsets,
        truncated=False,
        num_input_tokens=t,
        is_decoder=False,
    )


def test_rollout_by_hand_two_layers_two_tokens():
    # layer 1: Â = 0.5·[[1, 0], [.5, .5]] + 0.5·I = [[1, 0], [.25, .75]]
    # layer 2: Â = 0.5·[[0, 1], [1, 0]] + 0.5·I = [[.5, .5], [.5, .5]]
    a = hand_analysis([[[[1.0, 0.0], [0.5, 0.5]]], [[[0.0, 1.0], [1.0, 0.0]]]], ["x", "y"])
    result = rollout(a)
    np.testing.assert_allclose(result[0], [[1.0, 0.0], [0.25, 0.75]])
    np.testing.assert_allclose(result[1], [[0.625, 0.375], [0.625, 0.375]])


def test_rollout_averages_heads_before_the_residual():
    # heads [[1, 0], [1, 0]] and [[0, 1], [0, 1]] average to 0.5 everywhere; Â = [[.75, .25], [.25, .75]]
    a = hand_analysis([[[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [0.0, 1.0]]]], ["x", "y"])
    np.testing.assert_allclose(rollout(a)[0], [[0.75, 0.25], [0.25, 0.75]])


def test_rollout_renormalises_rows_that_do_not_sum_to_one():
    # a row summing to 0.5: 0.5·[.5, 0] + 0.5·[1, 0] = [.5, 0] (row 0); renormalised to [1, 0]
    a = hand_analysis([[[[0.5, 0.0], [0.0, 0.5]]]], ["x", "y"])
    np.testing.assert_allclose(rollout(a)[0], np.eye(2))


def test_rollout_of_one_layer_is_the_renormalised_residual_mix(tiny_model):
    a = analyze(tiny_model, TEXT)
    one_layer = replace(a, attentions=a.attentions[:1], hidden_states=a.hidden_states[:2])
    mixed = 0.5 * a.attentions[0].astype(np.float64).mean(axis=0) + 0.5 * np.eye(a.num_tokens)
    expected = mixed / mixed.sum(axis=1, keepdims=True)
    result = rollout(one_layer)
    assert result.shape == (1, a.num_tokens, a.num_tokens)
    np.testing.assert_allclose(result[0], expected, rtol=1e-6, atol=1e-7)


def test_rollout_rows_sum_to_one_and_decoder_stays_causal(tiny_model):
    a = analyze(tiny_model, TEXT)
    result = rollout(a)
    assert result.shape == (tiny_model.num_layers, a.num_tokens, a.num_tokens)
    np.testing.assert_allclose(result.sum(axis=-1), 1.0, atol=1e-6)
    if a.is_decoder:
        assert np.all(np.triu(result, k=1) == 0)


def _direct_value_norms(model, layer_module, x: torch.Tensor, heads: int) -> np.ndarray:
    """``[heads, T]`` ‖f_h(x_j)‖ from the block's own modules, without core.attention_heads.inside_head."""
    d = x.shape[-1] // heads
    if hasattr(layer_module, "attn"):  # GPT-2: pre-LN, Conv1D c_attn = [q | k | v], c_proj
        h = layer_module.ln_1(x)
        v = layer_module.attn.c_attn(h).split(x.shape[-1], dim=-1)[2]
        w_out = layer_module.attn.c_proj.weight  # Conv1D: [in, out]
        parts = [v[:, i * d : (i + 1) * d] @ w_out[i * d : (i + 1) * d, :] for i in range(heads)]
    else:  # BERT: Linear value, Linear output.dense (weight [out, in])
        v = layer_module.attention.self.value(x)
        w_out = layer_module.attention.output.dense.weight
        parts = [v[:, i * d : (i + 1) * d] @ w_out[:, i * d : (i + 1) * d].T for i in range(heads)]
    return torch.stack(parts).norm(dim=-1).double().numpy()


def test_norm_weighted_equals_a_direct_computation_from_the_weights(tiny_model):
    a = analyze(tiny_model, TEXT)
    encoding = tiny_model.tokenizer(TEXT, return_tensors="pt")
    with torch.no_grad():
        out = tiny_model.model(
            input_ids=encoding["input_ids"], output_attentions=True, output_hidden_states=True, return_dict=True
        )
        base = tiny_model.model
        blocks = base.encoder.layer if hasattr(base, "encoder") else base.h
        expected = np.stack(
            [
                out.attentions[layer][0].double().numpy()
                * _direct_value_norms(tiny_model, blocks[layer], out.hidden_states[layer][0], tiny_model.num_heads)[:, None, :]
                for layer in range(tiny_model.num_layers)
            ]
        )
    result = norm_weighted(tiny_model, a)
    assert result.shape == (tiny_model.num_layers, tiny_model.num_heads, a.num_tokens, a.num_tokens)
    np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-6)


def test_norm_weighted_rejects_unknown_architectures(tiny_bert):
    class Elsewhere:
        pass

    odd = replace(tiny_bert, model=Elsewhere())
    with pytest.raises(UnsupportedArchitecture):
        norm_weighted(odd, analyze(tiny_bert, TEXT))


def _special_share(matrices: np.ndarray, special: np.ndarray) -> float:
    """Mean over non-special queries of the share of each row that goes to special keys."""
    rows = matrices[..., ~special, :]
    return float((rows[..., special].sum(axis=-1) / rows.sum(axis=-1)).mean())


@pytest.mark.integration
def test_norm_weighting_shrinks_attention_to_cls_and_sep(bundled):
    a = analyze(bundled, TEXT)
    raw = _special_share(a.attentions, a.special_mask)
    weighted = _special_share(norm_weighted(bundled, a), a.special_mask)
    assert weighted < 0.6 * raw, (raw, weighted)
