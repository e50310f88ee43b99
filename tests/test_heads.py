"""A head recomputed from the model's weights equals the attention the model returned."""

from __future__ import annotations

import numpy as np
import pytest

from core.attention_heads.inside_head import compute_head, value_vectors_through_output
from core.model.inference import analyze

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
    """f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h, with W_V, b_V, W_O from a plainly loaded copy and its input by a hook."""
    import torch
    from transformers import AutoModel

    from tests.plain_heads import plain_layer

    a = analyze(tiny_model, TEXT)
    f = value_vectors_through_output(tiny_model, a, 1)
    assert f.shape == (tiny_model.num_heads, a.num_tokens, tiny_model.hidden_size)
    plain = AutoModel.from_pretrained(tiny_model.source, attn_implementation="eager").eval()
    ref = plain_layer(plain, tiny_model.num_heads, 1, {"input_ids": torch.tensor([a.input_ids])})
    d = ref["q"].shape[-1]
    np.testing.assert_allclose(f[3], ref["v"][0, 3] @ ref["w_o"][3 * d:4 * d], rtol=1e-5, atol=1e-6)


def test_bad_layer_or_head_is_rejected(tiny_bert):
    a = analyze(tiny_bert, TEXT)
    with pytest.raises(ValueError):
        compute_head(tiny_bert, a, 5, 0)
    with pytest.raises(ValueError):
        compute_head(tiny_bert, a, 0, 9)


@pytest.mark.integration
def test_bundled_model_heads_recompute(bundled):
    assert _max_difference(bundled, analyze(bundled, TEXT)) < 1e-5


# --- Architecture decided by config.model_type, and every recomputation checked (issue 18 item 5, issue 12 item 7) ---

@pytest.fixture(scope="module")
def lookalikes(tmp_path_factory):
    """Tiny MegatronBERT (pre-LN) and RoFormer (rotary): module names like BERT's, attention unlike it."""
    from core.model.models import load_model
    from tests.model_factory import build_tiny_megatron_bert, build_tiny_roformer

    root = tmp_path_factory.mktemp("lookalikes")
    return {
        "megatron-bert": load_model(str(build_tiny_megatron_bert(root / "megatron"))),
        "roformer": load_model(str(build_tiny_roformer(root / "roformer"))),
    }


@pytest.fixture(scope="module")
def tiny_electra(tmp_path_factory):
    from core.model.models import load_model
    from tests.model_factory import build_tiny_electra

    return load_model(str(build_tiny_electra(tmp_path_factory.mktemp("electra") / "electra")))


@pytest.mark.parametrize("model_type", ["megatron-bert", "roformer"])
def test_bert_lookalikes_are_refused_with_a_sentence(lookalikes, model_type):
    """Their modules compute attention themselves (never through the attention interface), so nothing is recorded."""
    from core.attention_heads.attention import norm_weighted
    from core.attention_heads.inside_head import architecture
    from core.attention_heads.neuron_view import queries_and_keys
    from core.model.recording import UnsupportedArchitecture

    model = lookalikes[model_type]
    assert model.model_type == model_type
    assert model.model.config._attn_implementation == "eager"  # the probe found no call of the recording function
    a = analyze(model, TEXT)
    for call in (lambda: architecture(model), lambda: norm_weighted(model, a),
                 lambda: queries_and_keys(model, a), lambda: compute_head(model, a, 0, 0)):
        with pytest.raises(UnsupportedArchitecture, match="attention interface"):
            call()


def test_a_recomputation_that_misses_the_models_attention_is_not_shown(tiny_model):
    from dataclasses import replace

    from core.attention_heads.attention import norm_weighted
    from core.attention_heads.neuron_view import queries_and_keys
    from core.model.recording import UnsupportedArchitecture

    a = analyze(tiny_model, TEXT)
    wrong = np.array(a.attentions)
    wrong[1, 2] = np.roll(wrong[1, 2], 1, axis=0)  # what a model with another attention formula would return
    odd = replace(a, attentions=wrong)
    compute_head(tiny_model, odd, 1, 1)  # other heads still check out
    for call in (lambda: compute_head(tiny_model, odd, 1, 2), lambda: norm_weighted(tiny_model, odd),
                 lambda: queries_and_keys(tiny_model, odd)):
        with pytest.raises(UnsupportedArchitecture, match="does not reproduce"):
            call()


def test_electra_is_recomputed_and_its_embeddings_project_is_named(tiny_electra):
    import torch

    from core.attention_heads.inside_head import architecture, embeddings_description

    assert architecture(tiny_electra).kind == "bert" and not architecture(tiny_electra).pre_ln
    a = analyze(tiny_electra, TEXT)
    assert _max_difference(tiny_electra, a) < 1e-5
    text = embeddings_description(tiny_electra)
    assert "embeddings_project" in text and "(16)" in text and "(32)" in text
    # hidden_states[0] really is the projected embedding output
    ids = torch.tensor([a.input_ids])
    with torch.no_grad():
        expected = tiny_electra.model.embeddings_project(tiny_electra.model.embeddings(input_ids=ids))[0].numpy()
    np.testing.assert_allclose(a.hidden_states[0], expected, atol=1e-5)


def test_supported_architectures_name_their_layer_norm_place(tiny_bert, tiny_gpt2):
    from core.attention_heads.inside_head import architecture, embeddings_description

    assert not architecture(tiny_bert).pre_ln and architecture(tiny_gpt2).pre_ln
    assert "embeddings_project" not in embeddings_description(tiny_bert)


def test_value_norms_are_the_lengths_of_the_plain_models_value_vectors(tiny_model):
    """‖f_h(x_j)‖ (computed from W_O^h's d×d Gram matrix) against the length of v_j W_O^h from a plainly loaded copy."""
    import torch
    from transformers import AutoModel

    from core.attention_heads.inside_head import value_norms
    from tests.plain_heads import plain_layer

    a = analyze(tiny_model, TEXT)
    plain = AutoModel.from_pretrained(tiny_model.source, attn_implementation="eager").eval()
    for layer in range(tiny_model.num_layers):
        ref = plain_layer(plain, tiny_model.num_heads, layer, {"input_ids": torch.tensor([a.input_ids])})
        d = ref["q"].shape[-1]
        expected = np.stack([np.linalg.norm(np.asarray(ref["v"][0, h], dtype=np.float64) @ ref["w_o"][h * d:(h + 1) * d],
                                            axis=-1) for h in range(tiny_model.num_heads)])
        np.testing.assert_allclose(value_norms(tiny_model, a, layer), expected, rtol=1e-5, atol=1e-6)
