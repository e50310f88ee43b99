"""A decoder's trace of a text read as the trace of its first n tokens (core.model.trace_prefix): every quantity equal
to a direct ``record`` of those tokens, no copy of the longer trace's stream, never for an encoder, and a page with a
lower token limit after a longer trace runs no forward pass (ui.results.traces)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.model.attention_layers import SINGLE_STACK
from core.model.models import load_model
from core.model.trace import record
from core.model.trace_prefix import prefix, prefix_of_text
from tests.model_factory import build_tiny_decoder

TEXT = ("The ferryman crossed the river every morning, and the children on the bank counted the stones he threw "
        "into the water while the gulls circled above the old wooden pier.")
CLOSE = dict(rtol=1e-4, atol=2e-5)  # float rounding: the longer pass's fused attention adds in another order


@pytest.fixture(scope="module", params=["gpt2", "llama", "gemma3_text"])
def decoder(request, tiny_gpt2, tmp_path_factory):
    if request.param == "gpt2":
        return tiny_gpt2
    return load_model(str(build_tiny_decoder(tmp_path_factory.mktemp(request.param), request.param)))


def test_a_prefix_is_the_record_of_the_first_tokens(decoder):
    longer = record(decoder, TEXT)
    t = len(longer.tokens(SINGLE_STACK))
    n = t // 2
    assert n >= 8
    view, direct = prefix(longer, n), record(decoder, TEXT, max_tokens=n)
    mine, theirs = view.tokens(SINGLE_STACK), direct.tokens(SINGLE_STACK)
    for name in ("text", "tokens", "ids", "offsets", "word_ids", "truncated", "num_input_tokens"):
        assert getattr(mine, name) == getattr(theirs, name), name
    np.testing.assert_array_equal(mine.special_mask, theirs.special_mask)
    assert np.shares_memory(view.residual[SINGLE_STACK], longer.residual[SINGLE_STACK])  # a view, no copy
    np.testing.assert_allclose(view.residual[SINGLE_STACK], direct.residual[SINGLE_STACK], **CLOSE)
    np.testing.assert_allclose(view.outputs["last_hidden_state"], direct.outputs["last_hidden_state"], **CLOSE)
    for layer in range(view.num_layers(SINGLE_STACK)):
        assert view.layer_info(SINGLE_STACK, layer) == direct.layer_info(SINGLE_STACK, layer)
        for read in ("queries", "keys", "values", "head_outputs", "residual_mid", "mlp_output", "attention"):
            np.testing.assert_allclose(getattr(view, read)(SINGLE_STACK, layer), getattr(direct, read)(SINGLE_STACK, layer),
                                       **CLOSE, err_msg=f"{read}, layer {layer}")
        np.testing.assert_array_equal(view.mask(SINGLE_STACK, layer), direct.mask(SINGLE_STACK, layer))
    assert prefix(longer, t) is longer


def test_a_prefix_of_the_whole_text_is_read_only_where_its_tokens_begin_the_longer_trace(decoder):
    longer = record(decoder, TEXT)
    assert prefix_of_text(decoder, longer, TEXT, 10) is not None
    assert prefix_of_text(decoder, longer, TEXT + " more", 10) is None  # another text
    other = record(decoder, "Another text altogether, not the one asked for.")
    assert prefix_of_text(decoder, other, TEXT, 4) is None


def test_never_for_an_encoder_or_an_encoder_decoder(tiny_bert, tiny_t5):
    longer = record(tiny_bert, TEXT)
    assert prefix(longer, 5) is None and prefix_of_text(tiny_bert, longer, TEXT, 5) is None
    pair = record(tiny_t5, (TEXT, "a target"))
    assert prefix(pair, 3) is None and prefix_of_text(tiny_t5, pair, TEXT, 3) is None


def test_a_lower_limit_after_the_whole_text_runs_no_forward_pass(tiny_gpt2_dir):
    """ui.results.traces under a lower limit after the whole text's trace: no call of the model's token embedding (a
    forward pass starts there; a block called again alone does not), and its numbers are a direct record's."""
    from ui import results
    from ui.models import loaded_model

    model = loaded_model(tiny_gpt2_dir)  # held, as the app's model cache holds it: the traces read it weakly
    text = TEXT + " This sentence is read by this test alone."
    whole = results.traces(tiny_gpt2_dir, text)
    calls = [0]

    def count(module, _args):
        calls[0] += isinstance(module, torch.nn.Embedding)

    handle = torch.nn.modules.module.register_module_forward_pre_hook(count)
    try:
        cut = results.traces(tiny_gpt2_dir, text, max_tokens=12)
        analysis = results.analyses(tiny_gpt2_dir, text, max_tokens=12)
    finally:
        handle.remove()
    assert calls[0] == 0
    assert len(cut.tokens(SINGLE_STACK)) == 12 and cut.tokens(SINGLE_STACK).truncated and cut is not whole
    direct = record(model, text, max_tokens=12)
    np.testing.assert_allclose(analysis.attentions, direct.attentions(SINGLE_STACK), **CLOSE)
