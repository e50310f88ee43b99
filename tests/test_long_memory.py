"""What a long text costs in memory (issue 41) without changing a weight: the long pass's masks are bool (a quarter of
float32's bytes) and a pooled head is computed a band of rows at a time, never its whole ``[T, T]``.

References: masks written cell by cell with numpy from their definitions (causal, sliding window, padding), and
weights from a plain eager forward pass (``attn_implementation="eager"``, ``output_attentions=True``) pooled by hand
with loops over blocks; never the code under test.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, causal_mask_function, sliding_window_causal_mask_function

import core.attention_heads.long_attention as long_attention
from core.attention_heads.attention import head_attention
from core.attention_heads.long_attention import pooled_head
from core.attention_heads.pooling import pixel_starts, pool
from core.model.inference import analyze
from core.model.models import load_model
from core.model.on_demand import StoredMask
from core.model.recording import IMPLEMENTATION, Recorder
from core.model.trace import Trace
from tests.model_factory import build_tiny_decoder
from tests.test_long_heatmap import pooled_by_hand

TEXT = "the cat sat on the mat and the dog ran after it while the bird sang " * 3
FLOOR = torch.finfo(torch.float32).min


def mask_by_hand(lengths: list[int], t: int, window: int | None) -> np.ndarray:
    """bool ``[B, 1, T, T]``: query q may attend key k (k <= q, q - k < window, k a real token of a right-padded row)."""
    q, k = np.arange(t)[:, None], np.arange(t)[None, :]
    rule = (k <= q) & ((q - k < window) if window is not None else True)
    return np.stack([(rule & (k < n))[None] for n in lengths])


@pytest.mark.parametrize("window", [None, 3])
def test_the_registered_mask_is_bool_in_a_long_pass_and_eager_attentions_float_elsewhere(window):
    t, lengths = 9, [9, 6]
    padding = torch.tensor([[True] * n + [False] * (t - n) for n in lengths])  # as create_causal_mask passes it
    mask_function = causal_mask_function if window is None else sliding_window_causal_mask_function(window)
    arguments = dict(batch_size=2, q_length=t, kv_length=t, q_offset=0, kv_offset=0, mask_function=mask_function,
                     attention_mask=padding, allow_is_causal_skip=True, dtype=torch.float32, use_vmap=False,
                     device="cpu")
    expected = mask_by_hand(lengths, t, window)
    build = ALL_MASK_ATTENTION_FUNCTIONS[IMPLEMENTATION]
    outside = build(**arguments)
    assert outside.dtype == torch.float32
    np.testing.assert_array_equal(outside.numpy(), np.where(expected, np.float32(0), np.float32(FLOOR)))
    with Recorder(rows_per_chunk=4):
        inside = build(**arguments)
    assert inside.dtype == torch.bool and inside.shape == (2, 1, t, t)
    np.testing.assert_array_equal(inside.numpy(), expected)
    # a causal mask without padding is still built (sdpa would skip it): on-demand weights need its cells
    with Recorder(rows_per_chunk=4):
        unpadded = build(**{**arguments, "batch_size": 1, "attention_mask": torch.ones(1, t, dtype=torch.bool)})
    np.testing.assert_array_equal(unpadded.numpy(), mask_by_hand([t], t, window))


@pytest.fixture(scope="module", params=["llama", "gemma3_text"])  # one full mask; a sliding and a full one
def tiny_lm(request, tmp_path_factory):
    folder = build_tiny_decoder(tmp_path_factory.mktemp("memory") / request.param, request.param)
    plain = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    return folder, load_model(str(folder)), plain


def eager_attentions(plain, input_ids: list[int]) -> np.ndarray:
    """``[layers, Hq, T, T]`` of a plain eager forward pass."""
    with torch.no_grad():
        out = plain(input_ids=torch.tensor([input_ids]), output_attentions=True)
    return np.stack([a[0].float().numpy() for a in out.attentions])


def test_a_long_pass_keeps_bool_masks_and_the_models_outputs(tiny_lm):
    _, model, plain = tiny_lm
    analysis = analyze(model, TEXT, on_demand=True)
    t = analysis.num_tokens
    masks = [s for s in analysis.trace.blocks["self"].stored if isinstance(s, StoredMask)]
    assert all(m.dtype == torch.bool for m in masks)  # built bool, not float32 made bool afterwards
    # the masks the trace kept (sdpa skips a plain causal one): each a sliding window's or the causal one, by hand
    windows = set(analysis.sliding_windows or (None,))
    for plane in (m.allowed.reshape(t, t) for m in masks):
        assert any(np.array_equal(plane, mask_by_hand([t], t, w)[0, 0]) for w in windows)
    if analysis.sliding_windows is not None:
        assert masks  # a windowed layer's mask is kept: its cells are not the causal rule
    with torch.no_grad():
        out = plain(input_ids=torch.tensor([analysis.input_ids]), output_hidden_states=True)
    expected = np.stack([h[0].float().numpy() for h in out.hidden_states[:-1]])  # the last one is after the final norm
    np.testing.assert_allclose(analysis.hidden_states[:-1], expected, atol=2e-5)
    eager = eager_attentions(plain, analysis.input_ids)
    for layer in range(eager.shape[0]):
        np.testing.assert_allclose(head_attention(model, analysis, layer, 1), eager[layer, 1], atol=2e-6)


def test_a_pooled_head_computed_in_bands_of_rows_is_the_eager_weights_pooled(tiny_lm, monkeypatch):
    _, model, plain = tiny_lm
    analysis = analyze(model, TEXT, on_demand=True)
    n, pixels = analysis.num_tokens, 12
    step = -(-n // pixels)  # positions per pixel, at most
    assert n % pixels  # pixels of uneven sizes: a band's end is not a multiple of a pixel's positions
    monkeypatch.setattr(long_attention, "BAND_CELLS", 2 * step * n)  # two pixel rows per band
    asked = []
    weights = Trace.attention

    def spy(self, stack, layer, heads=None, rows=None):
        asked.append(len(rows) if rows is not None else n)
        return weights(self, stack, layer, heads, rows)

    monkeypatch.setattr(Trace, "attention", spy)
    eager = eager_attentions(plain, analysis.input_ids)
    for layer in range(eager.shape[0]):
        asked.clear()
        heads = pooled_head(model, analysis, layer, 2, pixels)
        assert asked and max(asked) <= 2 * step and sum(asked) == n  # never the head's whole [T, T]
        full = head_attention(model, analysis, layer, 2)
        starts = pixel_starts(n, pixels)
        for how, head in heads.items():
            expected = pooled_by_hand(eager[layer, 2], pixels, how)
            shown = ~np.isnan(head.values)
            np.testing.assert_allclose(head.values[shown], expected[shown], rtol=1e-5, atol=1e-6)
            # and bit for bit what pooling the whole matrix gives, masked pixels aside
            np.testing.assert_array_equal(head.values[shown], pool(full, starts, starts, how)[shown])


def test_a_long_pass_frees_its_hidden_states_and_a_layers_mask_without_the_garbage_collector(tiny_lm):
    """Nothing the pass or a layer's recomputation made waits for the garbage collector (a reference cycle kept the
    pass's hidden states, 585 MB at 8,192 tokens, beside their copy until a collection)."""
    _, model, _ = tiny_lm
    gc.collect()
    gc.disable()
    try:
        analysis = analyze(model, TEXT, on_demand=True)
        head_attention(model, analysis, 1, 0)
        t, width = analysis.num_tokens, analysis.hidden_states.shape[-1]
        alive = [o for o in gc.get_objects() if issubclass(type(o), torch.Tensor) and not o.is_meta
                 and (tuple(o.shape) == (1, t, width) or (o.dim() == 4 and tuple(o.shape[-2:]) == (t, t)))]
        kept = {id(m.allowed.base) for m in analysis.trace.blocks["self"].stored if isinstance(m, StoredMask)}
        # the trace's memo of the layer asked for: its attention's input and mask, kept on purpose
        record = analysis.trace.layer("self", 1).records["self"]
        kept |= {id(x) for x in (record.inputs, record.mask) if x is not None}
        assert not [o for o in alive if id(o) not in kept], [tuple(o.shape) for o in alive]
    finally:
        gc.enable()
