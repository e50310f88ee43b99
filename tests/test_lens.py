"""The logit lens: its last layer is the model's own output, its first layers are not."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.model.inference import analyze
from core.model.models import load_model
from core.model.tokens import decoded_tokens
from core.outputs.lens import MissingLanguageModelHead, logit_lens
from core.outputs.predictions import NoLanguageModelHead, load_language_model
from tests.model_factory import build_tiny_bert_mlm, build_tiny_gpt2_lm

CASES = {"bert": (build_tiny_bert_mlm, "the [MASK] of a river"), "gpt2": (build_tiny_gpt2_lm, "the cat sat on the mat")}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, tmp_path_factory):
    build, text = CASES[request.param]
    model = load_model(str(build(tmp_path_factory.mktemp("lens") / request.param)))
    return model, load_language_model(model), text


def test_last_layer_is_the_models_own_prediction(case):
    model, lm, text = case
    analysis = analyze(model, text)
    lens = logit_lens(lm, analysis, k=5)
    layers, t = model.num_layers + 1, analysis.num_tokens
    assert lens.token_ids.shape == (layers, t, 5) and lens.probs.shape == (layers, t, 5)
    assert lens.probs.dtype == np.float32 and np.issubdtype(lens.token_ids.dtype, np.integer)
    encoding = model.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        probs = lm.model(**{k: v for k, v in encoding.items() if k in model.tokenizer.model_input_names}).logits[0].softmax(-1)
    best = probs.topk(5, dim=-1)
    np.testing.assert_array_equal(lens.token_ids[-1], best.indices.numpy())
    np.testing.assert_allclose(lens.probs[-1], best.values.numpy(), rtol=1e-4, atol=1e-6)
    assert (lens.final_ranks[-1] == 0).all()


def test_first_layers_differ_from_the_last(case):
    model, lm, text = case
    lens = logit_lens(lm, analyze(model, text), k=3)
    # Random tiny heads give near-uniform probabilities, so compare rankings rather than sizes.
    assert (lens.token_ids[0] != lens.token_ids[-1]).any()
    assert (np.abs(lens.probs[0] - lens.probs[-1]) / lens.probs[-1]).max() > 1e-3
    assert (np.diff(lens.probs, axis=-1) <= 1e-7).all()  # best first


def test_a_loaded_model_is_looked_through_its_own_head(case):
    model, lm, text = case
    analysis = analyze(model, text)
    np.testing.assert_array_equal(logit_lens(model, analysis).token_ids, logit_lens(lm, analysis).token_ids)


def test_a_model_without_a_head_raises_missing_language_model_head(tiny_bert):
    with pytest.raises(MissingLanguageModelHead, match="has no language-model head") as caught:
        logit_lens(tiny_bert, analyze(tiny_bert, "the bank of a river"))
    assert isinstance(caught.value, NoLanguageModelHead)


@pytest.mark.integration
def test_the_bundled_model_has_no_lens(bundled):
    with pytest.raises(MissingLanguageModelHead):
        logit_lens(bundled, analyze(bundled, "the bank of a river"))


def test_a_window_of_positions_is_the_whole_lens_from_there(case):
    """Issue 40, item 17: the head runs only at the positions shown, with the numbers of the whole lens there."""
    model, lm, text = case
    analysis = analyze(model, text)
    whole, window = logit_lens(lm, analysis, k=3), logit_lens(lm, analysis, k=3, start=2)
    assert window.start == 2 and window.tokens == decoded_tokens(lm.tokenizer, analysis.input_ids[2:])
    np.testing.assert_array_equal(window.token_ids, whole.token_ids[:, 2:])
    np.testing.assert_array_equal(window.final_ranks, whole.final_ranks[:, 2:])
    np.testing.assert_allclose(window.probs, whole.probs[:, 2:], rtol=1e-6)
    assert window.candidates == [layer[2:] for layer in whole.candidates]


def test_ranks_and_probabilities_of_a_window_by_hand():
    """The lens of a tiny GPT-2 at positions 3 on, against its head applied by hand to a plain run's hidden states
    (ln_f first, except on the last state, which transformers returns with it) and ranked with numpy."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        model = load_model(str(build_tiny_gpt2_lm(Path(folder) / "gpt2")))
        lm = load_language_model(model)
        text = "the cat sat on the mat and the dog sat on the log"
        lens = logit_lens(lm, analyze(model, text), k=2, start=3)
        ids = model.tokenizer(text, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            states = lm.model(input_ids=ids, output_hidden_states=True).hidden_states
            last = len(states) - 1
            logits = np.stack([lm.model.lm_head(s[0] if l == last else lm.model.transformer.ln_f(s[0])).double().numpy()
                               for l, s in enumerate(states)])[:, 3:]  # [layers + 1, T - 3, vocab]
    final = logits[-1].argmax(-1)
    ranks = (logits > np.take_along_axis(logits, np.broadcast_to(final[None, :, None], logits.shape[:2] + (1,)),
                                          -1)).sum(-1)
    np.testing.assert_array_equal(lens.final_ranks, ranks)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    np.testing.assert_array_equal(lens.token_ids[..., 0], logits.argmax(-1))
    np.testing.assert_allclose(lens.probs[..., 0], probs.max(-1), rtol=1e-5)
