"""A head recomputed from the model's weights equals the attention the model returned."""

from __future__ import annotations

import numpy as np
import pytest

from core.heads import compute_head, head_weights, value_vectors_through_output
from core.inference import analyze

TEXT = "I will hike along the bank of a river."


def _max_difference(model, analysis) -> float:
    return max(
        float(np.abs(compute_head(model, analysis, layer, head).weights - analysis.attentions[layer, head]).max())
        for layer in range(model.num_layers)
        for head in range(model.num_heads)
    )


def test_recomputed_attention_equals_the_models(tiny_model):
    assert _max_difference(tiny_model, analyze(tiny_model, TEXT)) < 1e-5


def test_decoder_keep_mask_is_the_lower_triangle_with_diagonal(tiny_gpt2):
    step = compute_head(tiny_gpt2, analyze(tiny_gpt2, TEXT), 1, 2)
    t = len(step.weights)
    np.testing.assert_array_equal(step.keep_mask, np.tril(np.ones((t, t), dtype=bool)))
    assert np.all(np.isneginf(step.scaled[~step.keep_mask]))
    np.testing.assert_allclose(step.scaled[step.keep_mask], (step.scores * step.scale)[step.keep_mask])


def test_steps_are_consistent(tiny_bert):
    a = analyze(tiny_bert, TEXT)
    step = compute_head(tiny_bert, a, 0, 1)
    d = tiny_bert.hidden_size // tiny_bert.num_heads
    assert step.queries.shape == step.keys.shape == step.values.shape == (a.num_tokens, d)
    np.testing.assert_allclose(step.scores, step.queries @ step.keys.T)
    assert step.scale == pytest.approx(d**-0.5)
    np.testing.assert_allclose(step.outputs, step.weights @ step.values)


def test_values_through_output_shape_and_definition(tiny_model):
    a = analyze(tiny_model, TEXT)
    f = value_vectors_through_output(tiny_model, a, 1)
    assert f.shape == (tiny_model.num_heads, a.num_tokens, tiny_model.hidden_size)
    w = head_weights(tiny_model, 1, 3)
    x = compute_head(tiny_model, a, 1, 3).layer_input
    np.testing.assert_allclose(f[3], (x @ w.w_v + w.b_v) @ w.w_o, rtol=1e-10)


def test_bad_layer_or_head_is_rejected(tiny_bert):
    with pytest.raises(ValueError):
        head_weights(tiny_bert, 5, 0)
    with pytest.raises(ValueError):
        head_weights(tiny_bert, 0, 9)


@pytest.mark.integration
def test_bundled_model_heads_recompute(bundled):
    assert _max_difference(bundled, analyze(bundled, TEXT)) < 1e-5
