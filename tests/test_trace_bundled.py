"""``core.model.trace`` on the three bundled models against a plainly loaded eager model of the same checkpoint.

The reference is ``AutoModel.from_pretrained(source, attn_implementation="eager")`` run once with
``output_attentions=True`` and ``output_hidden_states=True`` (transformers' hidden state ``l`` is block ``l``'s input)
and a hook on each block (its output).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModel

from core.attention_heads.retrieval import bundled_haystack
from core.model.trace import STORED_WEIGHTS_MAX_TOKENS, record
from core.model.trace_layers import block_layout

pytestmark = pytest.mark.integration


def _plain(model, ids: list[int]):
    plain = AutoModel.from_pretrained(model.source, attn_implementation="eager").eval()
    outputs: dict[int, torch.Tensor] = {}
    layout = block_layout(model)["self"]
    handles = []
    for layer, (path, _mlp) in enumerate(layout):
        block = plain.get_submodule(path)  # the app loads the same bare model class (AutoModel)
        handles.append(block.register_forward_hook(
            lambda _m, _a, out, layer=layer: outputs.__setitem__(layer, (out[0] if isinstance(out, tuple) else out)[0])))
    tensor = torch.tensor([ids])
    with torch.inference_mode():
        out = plain(input_ids=tensor, attention_mask=torch.ones_like(tensor), output_attentions=True,
                    output_hidden_states=True, **({"use_cache": False} if model.is_decoder else {}))
    for handle in handles:
        handle.remove()
    return out, outputs


@pytest.mark.parametrize("which, tokens", [("bundled", 128), ("bundled_lm", 300), ("bundled_gemma", 600)])
def test_bundled_trace_equals_a_plain_eager_pass(request, which, tokens):
    model = request.getfixturevalue(which)
    trace = record(model, bundled_haystack(), max_tokens=tokens)
    ids = list(trace.tokens("self").ids)
    assert len(ids) == min(tokens, model.max_tokens)
    out, block_outputs = _plain(model, ids)
    windows = [trace.layer_info("self", layer).sliding_window for layer in range(trace.num_layers("self"))]
    if which == "bundled_gemma":  # longer than its 512-token sliding window: the window masks cells
        assert any(w is not None and w < len(ids) for w in windows)
    for layer in range(trace.num_layers("self")):
        # sdpa and eager round differently: the stream agrees to 1e-5 of its largest entry (up to a few hundred)
        pre, post = out.hidden_states[layer][0].numpy(), block_outputs[layer].numpy()
        np.testing.assert_allclose(trace.residual_pre("self", layer), pre, rtol=0, atol=1e-5 * np.abs(pre).max())
        np.testing.assert_allclose(trace.residual_post("self", layer), post, rtol=0, atol=1e-5 * np.abs(post).max())
        np.testing.assert_allclose(trace.attention("self", layer), out.attentions[layer][0].numpy(), rtol=0, atol=1e-5)


def test_smollm2_weights_at_1024_tokens_are_computed_and_equal_eager(bundled_lm):
    """Above the stored size no whole layer is kept: the weights come from the recomputed queries and keys."""
    trace = record(bundled_lm, bundled_haystack(), max_tokens=1024)
    ids = list(trace.tokens("self").ids)
    assert len(ids) == 1024 > STORED_WEIGHTS_MAX_TOKENS
    out, _ = _plain(bundled_lm, ids)
    for layer in (0, 14, 29):
        np.testing.assert_allclose(trace.attention("self", layer), out.attentions[layer][0].numpy(), rtol=0, atol=1e-5)
    rows = [0, 511, 1023]
    np.testing.assert_allclose(trace.attention("self", 29, heads=[8, 2], rows=rows),
                               out.attentions[29][0, [8, 2]][:, rows].numpy(), rtol=0, atol=1e-5)
    assert trace.nbytes < 200e6  # residual stream (127 MB), its masks, two layers' quantities; no stored weights
