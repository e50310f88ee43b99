"""Issue 27's APIs on the real SmolLM2-135M-Instruct (GGUF expanded to float32), against direct computations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.attention_heads.induction import induction_scores
from core.causal.logit_attribution import direct_logit_attribution
from core.causal.patching import patch_heads, patch_residual
from core.outputs.generation import generate, next_token_distribution
from tests.lm_factory import logit_difference

pytestmark = pytest.mark.integration
CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Mary and John went to the store, Mary gave a drink to"


@pytest.fixture(scope="module")
def smollm2(bundled_lm):
    """SmolLM2 as the app loads it: ``load_model("SmolLM2-135M-Instruct")`` and its (tied) language-model head."""
    from core.outputs.predictions import load_language_model

    return load_language_model(bundled_lm)


def _ids(lm, text):
    return lm.tokenizer(text, return_tensors="pt")["input_ids"]


def _diff(lm, ids, module=None, hook=None):
    return logit_difference(lm, ids, " Mary", " John", module, hook, pre=True)


def test_sampling_distribution_and_greedy_text(smollm2):
    ids, probs = next_token_distribution(smollm2, "The capital of France is", top_k=5)
    with torch.no_grad():
        logits = smollm2.model(input_ids=_ids(smollm2, "The capital of France is")).logits[0, -1].double()
    best = logits.topk(5)
    assert ids.tolist() == best.indices.tolist()
    # the app applies the head to the last position alone (logits_to_keep): float32 rounds it differently (2.6e-6)
    np.testing.assert_allclose(probs, best.values.softmax(-1).numpy(), rtol=1e-5)
    assert smollm2.tokenizer.decode([int(ids[0])]) == " Paris"
    assert generate(smollm2, "The capital of France is", steps=2).text.startswith("The capital of France is Paris")


def test_residual_patching_cells_and_ends(smollm2):
    result = patch_residual(smollm2, CLEAN, CORRUPTED, " Mary", " John")
    clean, corrupted = _ids(smollm2, CLEAN), _ids(smollm2, CORRUPTED)
    differs = (clean != corrupted)[0].nonzero().flatten().tolist()
    assert result.grid.shape == (30, 14) and len(differs) == 1
    assert result.clean_diff > 0 > result.corrupted_diff  # the model prefers the name that was not repeated
    t = differs[0]
    assert result.grid[0, t] == pytest.approx(1, abs=1e-4)  # the only differing embedding carries everything
    assert np.allclose(result.grid[:, :t], 0, atol=1e-4)
    with torch.no_grad():
        hidden = smollm2.model(input_ids=clean, output_hidden_states=True).hidden_states
    layer = 15
    block = smollm2.model.model.layers[layer]

    def hook(module, args, kwargs):
        x = (args[0] if args else kwargs["hidden_states"]).clone()
        x[0, t] = hidden[layer][0, t]
        return ((x, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": x})
    handle = block.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        patched = _diff(smollm2, corrupted)
    finally:
        handle.remove()
    assert result.raw[layer, t] == pytest.approx(patched, abs=2e-3)


def test_head_patching_cell(smollm2):
    result = patch_heads(smollm2, CLEAN, CORRUPTED, " Mary", " John")
    assert result.grid.shape == (30, 9)
    layer = int(np.argmax(result.grid.max(1)))
    head = int(np.argmax(result.grid[layer]))
    projection = smollm2.model.model.layers[layer].self_attn.o_proj
    store = {}
    _diff(smollm2, _ids(smollm2, CLEAN), projection, lambda m, a: store.update(z=a[0].clone()))

    def hook(module, args):
        z = args[0].clone()
        z[..., head * 64:(head + 1) * 64] = store["z"][..., head * 64:(head + 1) * 64]
        return (z,)
    assert result.raw[layer, head] == pytest.approx(_diff(smollm2, _ids(smollm2, CORRUPTED), projection, hook), abs=2e-3)


def test_direct_logit_attribution_adds_up(smollm2):
    result = direct_logit_attribution(smollm2, CLEAN, " Mary", " John")
    assert result.total == pytest.approx(_diff(smollm2, _ids(smollm2, CLEAN)), abs=1e-4)
    parts = result.heads.sum() + result.mlps.sum() + result.embeddings + result.biases
    assert parts == pytest.approx(result.total, abs=1e-3) and result.biases == 0


def test_induction_scores_recomputed(smollm2):
    result = induction_scores(smollm2, length=20, seed=1)
    assert result.prefix == 1 and len(result.token_ids) == 41
    with torch.no_grad():
        attentions = smollm2.model(input_ids=torch.tensor(result.token_ids)[None], output_attentions=True).attentions
    layer, head = np.unravel_index(int(np.argmax(result.scores)), result.scores.shape)
    weights = attentions[layer][0, head].double()
    expected = np.mean([float(weights[21 + j, 2 + j]) for j in range(20)])
    assert result.scores[layer, head] == pytest.approx(expected, abs=1e-6)
    assert result.scores.max() > 0.3  # SmolLM2 has induction heads (measured 0.77 at length 40)
