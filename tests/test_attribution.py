"""Token attribution: integrated gradients add up (completeness), gradient × input equals autograd."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.attention_heads.attention import rollout
from core.causal.effects import EffectsError
from core.causal.token_attribution import rollout_to_tokens, token_attribution
from core.model.inference import analyze
from tests.test_effects import tiny_language_models  # noqa: F401 - a fixture

TEXT = "the cat sat on the mat and it was happy"


def _inputs(model, text):
    encoding = model.tokenizer(text, return_tensors="pt")
    return {k: v for k, v in encoding.items() if k in model.tokenizer.model_input_names}


def _embedding_measure_grad_x_input(model, text) -> np.ndarray:
    """Independently of core.causal.token_attribution: a normal forward from input ids, the word-embedding
    lookup's output kept by a hook, and autograd of pooled · (pooled / ‖pooled‖) back to it."""
    inputs = _inputs(model, text)
    kept = {}

    def keep(_module, _args, output):
        kept["x"] = output

    handle = model.model.get_input_embeddings().register_forward_hook(keep)
    try:
        with torch.enable_grad():
            hidden = model.model(**inputs).last_hidden_state[0]  # [T, hidden]
            pooled = hidden.mean(0)
            (grad,) = torch.autograd.grad(pooled @ (pooled / pooled.norm()).detach(), kept["x"])
    finally:
        handle.remove()
    return (grad[0] * kept["x"][0]).sum(-1).detach().numpy()


def test_gradient_x_input_equals_autograd(tiny_model):
    result = token_attribution(tiny_model, TEXT, method="gradient_x_input")
    assert result.scores.dtype == np.float32 and result.scores.shape == (len(result.tokens),)
    np.testing.assert_allclose(result.scores, _embedding_measure_grad_x_input(tiny_model, TEXT), rtol=1e-4, atol=1e-6)
    assert result.completeness_gap is None
    assert not any(p.grad is not None for p in tiny_model.model.parameters())  # a shared model keeps no gradients


@pytest.mark.parametrize("steps", [32, 48])
def test_integrated_gradients_are_complete_within_two_percent(tiny_model, steps):
    result = token_attribution(tiny_model, TEXT, steps=steps)
    difference = result.output - result.baseline_output
    assert abs(difference) > 1e-3  # the check below is not trivially about nothing
    assert result.total == pytest.approx(difference, rel=0.02)
    assert result.completeness_gap < 0.02
    assert (result.scores[result.special_mask] == 0).all()  # the baseline keeps special tokens


def test_integrated_gradients_report_progress_up_to_every_step(tiny_bert, monkeypatch):
    monkeypatch.setattr("core.causal.token_attribution.TOKENS_PER_BATCH", 1)  # one step per batch: many reports
    calls = []
    quiet = token_attribution(tiny_bert, TEXT, steps=32)
    result = token_attribution(tiny_bert, TEXT, steps=32, progress=lambda done, total: calls.append((done, total)))
    assert len(calls) == 32 and {total for _, total in calls} == {32}
    assert [done for done, _ in calls] == sorted({done for done, _ in calls}) and calls[-1][0] == 32
    np.testing.assert_allclose(result.scores, quiet.scores, rtol=1e-5, atol=1e-7)  # reporting changes nothing


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_target_attribution_is_complete_and_matches_the_log_probability(tiny_language_models, name):
    lm, text = tiny_language_models[name]
    result = token_attribution(lm, text, measure="target")
    inputs = _inputs(lm, text)
    with torch.no_grad():
        logp = lm.model(**inputs).logits[0, result.target.position].double().log_softmax(-1)
    assert result.target.token_id == int(logp.argmax())
    assert result.output == pytest.approx(float(logp.max()), abs=1e-4)
    assert result.completeness_gap < 0.02
    assert result.total == pytest.approx(result.output - result.baseline_output, rel=0.02)


def test_target_attribution_needs_a_head(tiny_bert):
    with pytest.raises(EffectsError, match="no language-model head"):
        token_attribution(tiny_bert, TEXT, measure="target")


def test_unknown_method_is_a_sentence(tiny_bert):
    with pytest.raises(EffectsError, match="must be one of"):
        token_attribution(tiny_bert, TEXT, method="saliency")


def test_rollout_to_tokens_for_the_sentence_embedding_is_the_mean_row(tiny_model):
    analysis = analyze(tiny_model, TEXT)
    rolled = rollout(analysis)
    result = token_attribution(tiny_model, TEXT, method="gradient_x_input")
    row = rollout_to_tokens(rolled, result)
    np.testing.assert_allclose(row, rolled[-1].mean(axis=0))
    assert row.sum() == pytest.approx(1.0)


@pytest.mark.integration
def test_bundled_model_integrated_gradients_are_complete(bundled):
    result = token_attribution(bundled, "I will hike along the bank of a river.", steps=32)
    assert result.completeness_gap < 0.02
    assert result.total == pytest.approx(result.output - result.baseline_output, rel=0.02)
    np.testing.assert_allclose(
        token_attribution(bundled, "I will hike along the bank of a river.", method="gradient_x_input").scores,
        _embedding_measure_grad_x_input(bundled, "I will hike along the bank of a river."), rtol=1e-3, atol=1e-5,
    )


@pytest.fixture(scope="module")
def steep_gpt2(tmp_path_factory):
    """The tiny GPT-2 language model with its query/key/value weights × 40: attention turns nearly one-hot, so the
    target's log-probability changes fast along part of the path, as on a trained language model."""
    from core.model.models import load_model
    from core.outputs.predictions import load_language_model
    from tests.model_factory import build_tiny_gpt2_lm

    lm = load_language_model(load_model(str(build_tiny_gpt2_lm(tmp_path_factory.mktemp("steep") / "gpt2"))))
    with torch.no_grad():
        for block in lm.model.transformer.h:
            block.attn.c_attn.weight.mul_(40.0)
    return lm


def test_integrated_gradients_refine_a_steep_path_until_they_add_up(steep_gpt2):
    """Issue 40, item 2: evenly spaced points miss a steep stretch of the path (about 10 % off here); the panels
    whose gradients do not add up are halved until the scores add up to f(input) − f(baseline), computed here from
    a plain forward pass of the input's and the baseline's embeddings."""
    text = "the cat sat on the"
    result = token_attribution(steep_gpt2, text, measure="target", steps=32)
    ids = torch.tensor([result.input_ids])
    embedding = steep_gpt2.model.get_input_embeddings().weight
    x = embedding[ids[0]].detach()
    kept = torch.tensor(result.special_mask)
    kept[0] = True  # a decoder's first token is kept: the attention sink
    baseline = torch.where(kept[:, None], x, embedding[steep_gpt2.tokenizer.pad_token_id])
    with torch.no_grad():
        logits = steep_gpt2.model(inputs_embeds=torch.stack([x, baseline])).logits[:, -1].double()
    f_input, f_baseline = logits.log_softmax(-1)[:, result.target.token_id].tolist()
    assert abs(f_input - f_baseline) > 0.05  # a change worth sharing out
    assert result.total == pytest.approx(f_input - f_baseline, rel=0.02)
    assert result.evaluations > 32  # the even rule was not enough, so panels were refined
    assert result.converged and result.completeness_gap < 0.02
    assert result.first_token_kept and result.scores[0] == 0
