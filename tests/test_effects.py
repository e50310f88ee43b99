"""Head knock-out: hooks equal hand-edited weights, are always removed, and stay in their own thread."""

from __future__ import annotations

import copy
import dataclasses
import threading

import numpy as np
import pytest
import torch

from core.attention_heads.inside_head import compute_head
from core.causal import effects, effects_compare
from core.causal.effects import EffectsError, ablate_heads, ablation, head_importance
from core.causal.effects_compare import sentence_cosine
from core.errors import AnalysisError
from core.model.inference import analyze
from core.model.models import load_model
from core.model.recording import UnsupportedArchitecture
from core.outputs.predictions import load_language_model
from tests.model_factory import build_tiny_bert_mlm, build_tiny_gpt2_lm, build_tiny_gpt_neo

TEXT = "the cat sat on the mat and it was happy"


def _copy(model):
    return dataclasses.replace(model, model=copy.deepcopy(model.model))


def _projection_columns(model, layer, head):
    """(weight, slice, axis): the head's input columns of the output projection, found independently of core.causal.effects."""
    d = model.hidden_size // model.num_heads
    cols = slice(head * d, (head + 1) * d)
    if model.model_type == "gpt2":
        return model.model.h[layer].attn.c_proj, cols, 0  # Conv1D: weight [in, out]
    return model.model.encoder.layer[layer].attention.output.dense, cols, 1  # Linear: weight [out, in]


def _zero_by_hand(model, layer, head):
    edited = _copy(model)
    proj, cols, axis = _projection_columns(edited, layer, head)
    with torch.no_grad():
        if axis == 0:
            proj.weight[cols, :] = 0
        else:
            proj.weight[:, cols] = 0
    return edited


def _hooks(model) -> list:
    """Every forward hook on the model (transformers installs its own output-capturing hooks)."""
    return [(name, tuple(m._forward_pre_hooks), tuple(m._forward_hooks)) for name, m in model.model.named_modules()]


def _no_pre_hooks(model) -> bool:
    return all(not m._forward_pre_hooks for m in model.model.modules())


def test_ablating_no_head_equals_analyze(tiny_model):
    plain, ablated = analyze(tiny_model, TEXT), ablate_heads(tiny_model, TEXT, [])
    np.testing.assert_array_equal(plain.hidden_states, ablated.hidden_states)
    np.testing.assert_array_equal(plain.attentions, ablated.attentions)
    assert plain.tokens == ablated.tokens


@pytest.mark.parametrize("layer, head", [(0, 1), (1, 3)])
def test_zero_ablation_equals_zeroing_the_projection_columns_by_hand(tiny_model, layer, head):
    hooked = ablate_heads(tiny_model, TEXT, [(layer, head)], method="zero")
    by_hand = analyze(_zero_by_hand(tiny_model, layer, head), TEXT)
    np.testing.assert_allclose(hooked.hidden_states, by_hand.hidden_states, atol=1e-5)
    np.testing.assert_allclose(hooked.attentions, by_hand.attentions, atol=1e-6)
    original = analyze(tiny_model, TEXT)
    np.testing.assert_array_equal(hooked.hidden_states[: layer + 1], original.hidden_states[: layer + 1])
    assert np.abs(hooked.hidden_states[layer + 1] - original.hidden_states[layer + 1]).max() > 1e-4


def test_mean_ablation_equals_a_hand_computed_mean_output(tiny_model):
    layer, head = 1, 2
    original = analyze(tiny_model, TEXT)
    mean_output = compute_head(tiny_model, original, layer, head).outputs.mean(axis=0)  # [d], step by step in float64
    edited = _zero_by_hand(tiny_model, layer, head)
    proj, cols, axis = _projection_columns(edited, layer, head)
    original_proj, _, _ = _projection_columns(tiny_model, layer, head)
    with torch.no_grad():
        w = original_proj.weight.double()
        slice_weight = w[cols, :] if axis == 0 else w[:, cols].T  # [d, out]
        proj.bias += (torch.from_numpy(mean_output) @ slice_weight).float()
    hooked = ablate_heads(tiny_model, TEXT, [(layer, head)], method="mean")
    np.testing.assert_allclose(hooked.hidden_states, analyze(edited, TEXT).hidden_states, atol=1e-4)


@pytest.mark.parametrize("method", ["zero", "mean"])
def test_a_head_whose_output_weights_are_zero_changes_nothing(tiny_model, method):
    silent = _zero_by_hand(tiny_model, 0, 2)
    plain, ablated = analyze(silent, TEXT), ablate_heads(silent, TEXT, [(0, 2)], method=method)
    np.testing.assert_allclose(ablated.hidden_states, plain.hidden_states, atol=1e-6)


def test_a_failed_call_leaves_no_hook_behind(tiny_model):
    before = analyze(tiny_model, TEXT)
    hooks = _hooks(tiny_model)
    with pytest.raises(AnalysisError):
        ablate_heads(tiny_model, "   ", [(0, 0)])
    with pytest.raises(RuntimeError, match="boom"):
        with ablation(tiny_model, [(0, 0), (1, 1)]):
            raise RuntimeError("boom")
    assert _hooks(tiny_model) == hooks and _no_pre_hooks(tiny_model)
    np.testing.assert_array_equal(analyze(tiny_model, TEXT).hidden_states, before.hidden_states)


def test_an_unknown_head_is_a_sentence_and_registers_nothing(tiny_model):
    with pytest.raises(EffectsError, match="There is no head 9 in layer 0"):
        ablate_heads(tiny_model, TEXT, [(0, 0), (0, 9)])
    assert _no_pre_hooks(tiny_model)


def test_the_ablation_does_not_reach_another_threads_forward_pass(tiny_model):
    original = analyze(tiny_model, TEXT)
    seen = {}
    with ablation(tiny_model, [(0, 0), (0, 1), (1, 0)]):
        inside = analyze(tiny_model, TEXT)
        worker = threading.Thread(target=lambda: seen.setdefault("other", analyze(tiny_model, TEXT)))
        worker.start()
        worker.join()
    assert np.abs(inside.hidden_states - original.hidden_states).max() > 1e-4
    np.testing.assert_array_equal(seen["other"].hidden_states, original.hidden_states)


@pytest.mark.parametrize("method", ["zero", "mean"])
def test_batched_importance_equals_one_head_at_a_time(tiny_model, method):
    calls = []
    grid = head_importance(tiny_model, TEXT, method=method, progress=lambda done, total: calls.append((done, total)))
    assert grid.dtype == np.float32 and grid.shape == (tiny_model.num_layers, tiny_model.num_heads)
    original = analyze(tiny_model, TEXT)
    for layer in range(tiny_model.num_layers):
        for head in range(tiny_model.num_heads):
            expected = 1.0 - sentence_cosine(original, ablate_heads(tiny_model, TEXT, [(layer, head)], method=method))
            assert grid[layer, head] == pytest.approx(expected, abs=2e-6)
    assert calls and calls[-1] == (grid.size, grid.size)
    assert _no_pre_hooks(tiny_model)


def test_importance_is_batched_in_several_passes(tiny_bert, monkeypatch):
    monkeypatch.setattr(effects, "TOKENS_PER_BATCH", 24)  # 2 copies of the 12-token text per pass
    calls = []
    grid = head_importance(tiny_bert, TEXT, progress=lambda done, total: calls.append(done))
    assert calls == [2, 4, 6, 8]
    monkeypatch.setattr(effects, "TOKENS_PER_BATCH", 4096)
    np.testing.assert_allclose(head_importance(tiny_bert, TEXT), grid, atol=1e-6)


@pytest.fixture(scope="module")
def tiny_language_models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lm")
    bert = load_language_model(load_model(str(build_tiny_bert_mlm(folder / "bert"))))
    gpt2 = load_language_model(load_model(str(build_tiny_gpt2_lm(folder / "gpt2"))))
    return {"bert": (bert, "the [MASK] of a river"), "gpt2": (gpt2, "the cat sat on the")}


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_target_importance_is_the_drop_in_log_probability(tiny_language_models, name):
    lm, text = tiny_language_models[name]
    net = effects.network(lm)
    inputs = effects.encode(net, text)
    position = inputs["input_ids"][0].tolist().index(lm.tokenizer.mask_token_id) if name == "bert" else inputs["input_ids"].shape[1] - 1
    with torch.no_grad():
        logp = lm.model(**inputs).logits[0, position].double().log_softmax(-1)
    target = int(logp.argmax())
    grid = head_importance(lm, text, measure="target", method="zero")
    for layer, head in [(0, 0), (1, 3)]:
        with torch.no_grad(), ablation(lm, [(layer, head)]):
            ablated = lm.model(**inputs).logits[0, position].double().log_softmax(-1)
        assert grid[layer, head] == pytest.approx(float(logp[target] - ablated[target]), abs=1e-5)
    np.testing.assert_allclose(head_importance(lm, text, measure="target", target=target), grid, atol=1e-6)


def test_target_needs_a_mask_token_and_a_single_token(tiny_language_models, tiny_bert):
    lm, _ = tiny_language_models["bert"]
    with pytest.raises(EffectsError, match="has no \\[MASK\\]"):
        head_importance(lm, "the bank of a river", measure="target")
    with pytest.raises(EffectsError, match="single token"):
        head_importance(lm, "the [MASK] of a river", measure="target", target="river bank")
    with pytest.raises(EffectsError, match="no language-model head"):
        head_importance(tiny_bert, TEXT, measure="target")


def test_unsupported_architecture_is_a_sentence(tmp_path):
    neo = load_model(str(build_tiny_gpt_neo(tmp_path / "neo")))
    with pytest.raises(UnsupportedArchitecture, match="Knocking out heads is not available for gpt_neo"):
        ablate_heads(neo, TEXT, [(0, 0)])


def test_attention_to_token_averages_the_non_special_queries(tiny_model):
    analysis = analyze(tiny_model, TEXT)
    token = 3
    grid = effects_compare.attention_to_token(analysis, token)
    queries = [q for q in range(analysis.num_tokens) if not analysis.special_mask[q] and (not analysis.is_decoder or q >= token)]
    for layer, head in [(0, 0), (1, 2)]:
        assert grid[layer, head] == pytest.approx(np.mean([analysis.attentions[layer, head, q, token] for q in queries]), rel=1e-5)


def test_rank_correlation_is_spearman():
    a = np.array([1.0, 5.0, 2.0, 8.0])
    assert effects_compare.rank_correlation(a, a**3).rho == pytest.approx(1.0)
    assert effects_compare.rank_correlation(a, -a).rho == pytest.approx(-1.0)
    assert np.isnan(effects_compare.rank_correlation(a, np.ones(4)).rho)


@pytest.mark.integration
def test_bundled_model_importance_is_positive_and_batched(bundled):
    grid = head_importance(bundled, "I will hike along the bank of a river.")
    assert grid.shape == (6, 12) and (grid >= -1e-6).all() and grid.max() > 1e-3
    expected = 1.0 - sentence_cosine(analyze(bundled, "I will hike along the bank of a river."),
                                     ablate_heads(bundled, "I will hike along the bank of a river.", [(3, 5)]))
    assert grid[3, 5] == pytest.approx(expected, abs=1e-5)


def test_target_change_reports_the_same_drop_as_the_importance_map(tiny_language_models):
    lm, text = tiny_language_models["gpt2"]
    grid = head_importance(lm, text, measure="target", method="mean")
    change = effects_compare.target_change(lm, text, [(1, 2)], method="mean", k=4)
    assert change.logp_change == pytest.approx(-float(grid[1, 2]), abs=1e-5)
    assert change.before_ids[0] == change.target.token_id  # no target given: the model's own top prediction
    assert len(change.after_candidates) == 4 and (np.diff(change.after_probs) <= 0).all()
    unchanged = effects_compare.target_change(lm, text, [], k=4)
    np.testing.assert_array_equal(unchanged.before_ids, unchanged.after_ids)


def _brute_force_p(a, b) -> float:
    """Two-sided permutation p-value, by hand: every ordering of ``b`` against ``a``, Spearman's ρ from scipy."""
    import itertools

    from scipy.stats import spearmanr

    observed = abs(spearmanr(a, b).statistic)
    extreme = [abs(spearmanr(a, np.array(p)).statistic) >= observed - 1e-12 for p in itertools.permutations(b)]
    return sum(extreme) / len(extreme)


def test_rank_correlation_p_value_is_exact_for_few_items():
    """Issue 28: ρ = −1 over 5 items is 2 of the 5! orderings (p = 0.017), not scipy's t approximation (1.4e-24)."""
    import math

    five = np.array([0.3, 0.1, 0.9, 0.5, 0.7])
    result = effects_compare.rank_correlation(five, -five)
    assert result.rho == pytest.approx(-1.0) and result.n == 5
    assert result.p_value == pytest.approx(2 / math.factorial(5))
    assert effects_compare.rank_correlation(five[:4], five[:4] ** 2).p_value == pytest.approx(2 / math.factorial(4))
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=7), rng.normal(size=7)
    b[2] = b[5]  # a tie
    assert effects_compare.rank_correlation(a, b).p_value == pytest.approx(_brute_force_p(a, b))


def test_rank_correlation_p_value_is_scipys_for_many_items():
    from scipy.stats import spearmanr

    rng = np.random.default_rng(1)
    a, b = rng.normal(size=30), rng.normal(size=30)
    assert effects_compare.rank_correlation(a, b).p_value == pytest.approx(spearmanr(a, b).pvalue)
