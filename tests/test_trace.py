"""``core.model.trace``: every quantity of a trace against forward hooks on a plainly loaded model.

The reference is transformers' own model loaded with ``AutoModel.from_pretrained(folder, attn_implementation="eager")``
(not through the app), run once with ``output_attentions=True``; hooks on its q/k/v projections, the output
projection's input, the MLP's output map, the norms around the attention and the blocks give each quantity. Queries
and keys are turned by the family's own q/k-norm module (hooked) and rotary function, as the attention reads them.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch
from transformers import AutoModel

import core.model.trace as trace_module
from core.errors import AnalysisError
from core.model.models import load_model
from core.model.trace import record
from tests import model_factory

TEXT = "The cat sat on the mat. It was happy to be home, and the bass fish swims along the river bank."
TARGET = "The cat sat on the mat."

# Per family: per stack, where the plain model's blocks are and, inside a block, its parts (module path, and whether
# the quantity is the module's input or output). "mid": the stream after the attention sub-block.
_DECODER = {"blocks": "layers", "attention": "self_attn", "q": "q_proj", "k": "k_proj", "v": "v_proj",
            "o": "o_proj", "mid": ("post_attention_layernorm", "in"), "mlp": "mlp.down_proj", "rotary": True}
_GEMMA = {**_DECODER, "mid": ("pre_feedforward_layernorm", "in"), "q_norm": "q_norm", "k_norm": "k_norm"}
SPECS = {
    "bert": {"self": {"blocks": "encoder.layer", "attention": "attention.self", "q": "query", "k": "key", "v": "value",
                      "o": "attention.output.dense", "mid": ("attention.output.LayerNorm", "out"),
                      "mlp": "output.dense"}},
    "gpt2": {"self": {"blocks": "h", "attention": "attn", "qkv": "c_attn", "o": "c_proj", "mid": ("ln_2", "in"),
                      "mlp": "mlp.c_proj"}},
    "llama": {"self": _DECODER},
    "qwen2": {"self": _DECODER},
    "gemma2": {"self": {**_GEMMA, "q_norm": None, "k_norm": None}},
    "gemma3_text": {"self": _GEMMA},
    "t5": {
        "encoder": {"blocks": "encoder.block", "attention": "layer.0.SelfAttention", "q": "q", "k": "k", "v": "v",
                    "o": "o", "mid": ("layer.1.layer_norm", "in"), "mlp": "layer.1.DenseReluDense.wo"},
        "decoder": {"blocks": "decoder.block", "attention": "layer.0.SelfAttention", "q": "q", "k": "k", "v": "v",
                    "o": "o", "mid": ("layer.1.layer_norm", "in"), "mlp": "layer.2.DenseReluDense.wo"},
        "cross": {"blocks": "decoder.block", "attention": "layer.1.EncDecAttention", "q": "q", "k": "k", "v": "v",
                  "o": "o", "mid": ("layer.2.layer_norm", "in"), "mlp": "layer.2.DenseReluDense.wo"},
    },
    "bart": {
        "encoder": {"blocks": "encoder.layers", "attention": "self_attn", "q": "q_proj", "k": "k_proj", "v": "v_proj",
                    "o": "out_proj", "mid": ("self_attn_layer_norm", "out"), "mlp": "fc2"},
        "decoder": {"blocks": "decoder.layers", "attention": "self_attn", "q": "q_proj", "k": "k_proj", "v": "v_proj",
                    "o": "out_proj", "mid": ("self_attn_layer_norm", "out"), "mlp": "fc2"},
        "cross": {"blocks": "decoder.layers", "attention": "encoder_attn", "q": "q_proj", "k": "k_proj",
                  "v": "v_proj", "o": "out_proj", "mid": ("encoder_attn_layer_norm", "out"), "mlp": "fc2"},
    },
}
EAGER_ATTENTIONS = {"self": "attentions", "encoder": "encoder_attentions", "decoder": "decoder_attentions",
                    "cross": "cross_attentions"}


@pytest.fixture(scope="module", params=list(SPECS))
def family(request, tmp_path_factory):
    name = request.param
    root = tmp_path_factory.mktemp(name)
    if name in ("bert", "gpt2", "t5", "bart"):
        folder = getattr(model_factory, f"build_tiny_{name}")(root / name)
    else:
        folder = model_factory.build_tiny_decoder(root / name, name)
    return name, folder, load_model(str(folder))


def _heads(x: torch.Tensor, d: int) -> np.ndarray:
    """``[1, T, H·d]`` → ``[H, T, d]``."""
    return x[0].reshape(x.shape[1], -1, d).transpose(0, 1).float().numpy()


def _reference(name: str, folder, trace) -> dict:
    """Every quantity of every stack and layer from hooks on a plainly loaded eager model."""
    plain = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    seen: dict = {}
    handles = []

    def keep(key, what):
        def hook(_module, args, kwargs, output):
            value = output if what == "out" else (args[0] if args else next(iter(kwargs.values())))
            seen[key] = (value[0] if isinstance(value, tuple) else value).detach()
            if what == "kwargs":
                seen[key] = kwargs
        return hook

    for stack, spec in SPECS[name].items():
        for layer, block in enumerate(plain.get_submodule(spec["blocks"])):
            def at(path, key, what, block=block, stack=stack, layer=layer):
                handles.append(block.get_submodule(path).register_forward_hook(keep((stack, layer, key), what),
                                                                               with_kwargs=True))
            handles.append(block.register_forward_hook(keep((stack, layer, "pre"), "in"), with_kwargs=True))
            handles.append(block.register_forward_hook(keep((stack, layer, "post"), "out"), with_kwargs=True))
            att = spec["attention"]
            for part in ("q", "k", "v", "qkv", "q_norm", "k_norm"):
                if spec.get(part):
                    at(f"{att}.{spec[part]}", part, "out")
            at(att, "attention_call", "kwargs")
            at(spec["o"] if "." in spec["o"] else f"{att}.{spec['o']}", "heads", "in")
            at(spec["mid"][0], "mid", spec["mid"][1])
            at(spec["mlp"], "mlp", "out")
    ids = torch.tensor([list(trace.tokens(trace.stack_names[0]).ids)])
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if "target" in trace.sequences:
        inputs["decoder_input_ids"] = torch.tensor([list(trace.sequences["target"].ids)])
    with torch.inference_mode():
        out = plain(**inputs, output_attentions=True)
    for handle in handles:
        handle.remove()
    seen["attentions"] = {s: getattr(out, EAGER_ATTENTIONS[s]) for s in SPECS[name]}
    return seen


def _turned(name: str, spec: dict, seen: dict, key, x: np.ndarray, norm: str | None) -> np.ndarray:
    """Queries or keys as the attention reads them: the family's q/k-norm output (hooked) and its rotary function."""
    stack, layer = key
    if spec.get(norm):
        normed = seen[(stack, layer, norm)][0].float()  # [T, H, d] or already [H, T, d]
        x = (normed if tuple(normed.shape) == x.shape else normed.transpose(0, 1)).numpy()
    if spec.get("rotary"):
        family = importlib.import_module(f"transformers.models.{name.split('_')[0]}.modeling_{name.split('_')[0]}")
        cos, sin = seen[(stack, layer, "attention_call")]["position_embeddings"]
        t = torch.from_numpy(x)[None]
        x = family.apply_rotary_pos_emb(t, t, cos, sin)[0][0].numpy()
    return x


def test_every_quantity_equals_hooks_on_the_plain_eager_model(family):
    name, folder, model = family
    pair = model.is_encoder_decoder
    trace = record(model, (TEXT, TARGET) if pair else TEXT)
    if name.startswith("gemma"):  # the text is longer than the tiny sliding window, so the window masks cells
        assert len(trace.tokens("self")) > 4 and trace.layer_info("self", 0).sliding_window == 4
    seen = _reference(name, folder, trace)
    close = {"rtol": 1e-4, "atol": 2e-5}
    for stack, spec in SPECS[name].items():
        assert trace.num_layers(stack) == len(seen["attentions"][stack])
        for layer in range(trace.num_layers(stack)):
            info = trace.layer_info(stack, layer)
            d = info.head_dim
            np.testing.assert_allclose(trace.residual_pre(stack, layer), seen[(stack, layer, "pre")][0], **close)
            np.testing.assert_allclose(trace.residual_post(stack, layer), seen[(stack, layer, "post")][0], **close)
            np.testing.assert_allclose(trace.residual_mid(stack, layer), seen[(stack, layer, "mid")][0], **close)
            np.testing.assert_allclose(trace.mlp_output(stack, layer), seen[(stack, layer, "mlp")][0], **close)
            if "qkv" in spec:  # GPT-2's fused projection: queries, keys, values side by side
                q, k, v = seen[(stack, layer, "qkv")].split(seen[(stack, layer, "qkv")].shape[-1] // 3, dim=-1)
            else:
                q, k, v = (seen[(stack, layer, p)] for p in ("q", "k", "v"))
            queries = _turned(name, spec, seen, (stack, layer), _heads(q, d), "q_norm")
            keys = _turned(name, spec, seen, (stack, layer), _heads(k, d), "k_norm")
            np.testing.assert_allclose(trace.queries(stack, layer), queries, **close)
            np.testing.assert_allclose(trace.keys(stack, layer), keys, **close)
            np.testing.assert_allclose(trace.values(stack, layer), _heads(v, d), **close)
            np.testing.assert_allclose(trace.head_outputs(stack, layer), _heads(seen[(stack, layer, "heads")], d), **close)
            eager = seen["attentions"][stack][layer][0].numpy()
            np.testing.assert_allclose(trace.attention(stack, layer), eager, rtol=0, atol=1e-5)
            assert trace.attention(stack, layer).dtype == np.float32
            # the mask is where the eager weights can be non-zero (a masked cell's weight is exactly 0)
            assert not eager[:, ~trace.mask(stack, layer)].any()


def test_heads_and_rows_are_the_whole_layer_s_cells(family):
    name, _folder, model = family
    trace = record(model, (TEXT, TARGET) if model.is_encoder_decoder else TEXT)
    stack = trace.stack_names[-1]
    whole = trace.attention(stack, 1)
    rows = [0, 3, len(trace.tokens(stack)) - 1]
    np.testing.assert_array_equal(trace.attention(stack, 1, heads=[2, 0], rows=rows), whole[[2, 0]][:, rows])
    np.testing.assert_allclose(whole.sum(axis=-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("family", [n for n in SPECS if set(SPECS[n]) == {"self"}], indirect=True)
def test_grouped_query_heads_read_their_shared_key_head(family):
    """One-stack families only: the tiny encoder-decoders have no grouped-query heads."""
    name, _folder, model = family
    trace = record(model, TEXT)
    info = trace.layer_info("self", 0)
    groups = info.heads // info.kv_heads
    q, k = trace.queries("self", 0).astype(np.float64), trace.keys("self", 0).astype(np.float64)
    by_hand = np.stack([q[h] @ k[h // groups].T * info.scaling for h in range(info.heads)])
    if info.softcap:
        by_hand = np.tanh(by_hand / info.softcap) * info.softcap
    by_hand = np.where(trace.mask("self", 0), by_hand, -np.inf)
    by_hand = np.exp(by_hand - by_hand.max(-1, keepdims=True))
    np.testing.assert_allclose(trace.attention("self", 0), by_hand / by_hand.sum(-1, keepdims=True), atol=1e-5)


def test_the_trace_is_read_only_and_refuses_what_it_cannot_read(tiny_gpt2, tiny_t5, tmp_path):
    trace = record(tiny_gpt2, TEXT)
    with pytest.raises(ValueError):
        trace.residual_pre("self", 0)[0, 0] = 1.0
    with pytest.raises(ValueError, match="stack"):
        trace.attention("cross", 0)
    with pytest.raises(ValueError, match="layer"):
        trace.attention("self", 99)
    with pytest.raises(AnalysisError):
        record(tiny_gpt2, "   ")
    with pytest.raises(AnalysisError):
        record(tiny_t5, TEXT)
    with pytest.raises(AnalysisError):
        record(tiny_gpt2, (TEXT, TARGET))
    neo = load_model(str(model_factory.build_tiny_gpt_neo(tmp_path / "neo")))  # loaded with plain eager attention
    with pytest.raises(AnalysisError, match="record"):
        record(neo, TEXT)


def test_long_layers_are_computed_not_stored_and_a_layer_s_block_runs_once(tiny_gpt2, monkeypatch):
    """At or under STORED_WEIGHTS_MAX_TOKENS the layer asked for is kept; above it no weights are, and the cells are
    the same. Weights call the block up to its attention only (its output and MLP never run), once per layer (a
    second head calls nothing); a layer's other quantities call the whole block once, and weights then read it."""
    short = record(tiny_gpt2, TEXT)
    t = len(short.tokens("self"))
    held = short.nbytes
    stored = short.attention("self", 0, heads=[1])
    assert short.nbytes - held >= 4 * 4 * t * t  # the whole layer's weights (4 heads), kept
    monkeypatch.setattr(trace_module, "STORED_WEIGHTS_MAX_TOKENS", 4)
    long = record(tiny_gpt2, TEXT)
    block = tiny_gpt2.model.get_submodule(long.blocks["self"].paths[0])
    mlp = tiny_gpt2.model.get_submodule(long.blocks["self"].mlp_outputs[0])
    started, ended, mlps = [], [], []
    handles = [block.register_forward_pre_hook(lambda *_: started.append(1)),
               block.register_forward_hook(lambda *_: ended.append(1)), mlp.register_forward_hook(lambda *_: mlps.append(1))]
    try:
        np.testing.assert_array_equal(long.attention("self", 0, heads=[1]), stored)
        long.attention("self", 0, heads=[3], rows=[2, 5])
        assert (len(started), len(ended), len(mlps)) == (1, 0, 0)  # called once, stopped at its attention
        assert long.nbytes == short.nbytes - 4 * 4 * t * t  # the same queries and keys kept, no weights
        long.residual_mid("self", 0), long.attention("self", 0)
        assert (len(started), len(ended), len(mlps)) == (2, 1, 1)  # the whole block once; its weights read from it
        long.attention("self", 1), long.residual_mid("self", 1), long.layer("self", 0)
        assert len(started) == 2  # layer 1 is another block; layer 0 is still in the memo of two
    finally:
        for handle in handles:
            handle.remove()


def test_the_pass_runs_torch_s_fused_attention_except_where_it_soft_caps(family, monkeypatch):
    """Each layer's output comes from torch's scaled_dot_product_attention (transformers' sdpa), as in the model's
    default forward; Gemma 2's soft-capped layers fall back to its eager attention, which sdpa cannot compute."""
    name, _folder, model = family
    calls = []
    fused = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                        lambda *a, **k: calls.append(1) or fused(*a, **k))
    trace = record(model, (TEXT, TARGET) if model.is_encoder_decoder else TEXT)
    layers = sum(trace.num_layers(stack) for stack in trace.stack_names)
    assert len(calls) == (0 if name == "gemma2" else layers)


def test_a_cut_text_says_so_and_keeps_the_tokenizer_s_tokens(tiny_bert):
    """Tokens, ids, offsets and special tokens are the tokenizer's own (special tokens by its mask and ids)."""
    cut = record(tiny_bert, TEXT, max_tokens=6).tokens("self")
    whole = tiny_bert.tokenizer(TEXT, return_offsets_mapping=True)
    assert len(cut) == 6 and cut.truncated and cut.num_input_tokens == len(whole["input_ids"])
    assert cut.ids[:5] == tuple(whole["input_ids"][:5]) and cut.tokens[0] == "[CLS]" and cut.tokens[-1] == "[SEP]"
    assert cut.offsets[1:5] == tuple(tuple(o) for o in whole["offset_mapping"][1:5])
    assert cut.special_mask.tolist() == [True, False, False, False, False, True]
    full = record(tiny_bert, TEXT).tokens("self")
    assert not full.truncated and full.num_input_tokens == len(full) == len(whole["input_ids"])


def test_a_key_slice_gives_those_columns_of_the_whole_rows(tiny_gpt2, monkeypatch):
    """A decoder's rows 3–5 put no weight past key 5, so their softmax over keys 0–5 alone gives the same cells."""
    monkeypatch.setattr(trace_module, "STORED_WEIGHTS_MAX_TOKENS", 4)
    long = record(tiny_gpt2, TEXT)
    whole = long.attention("self", 1, rows=slice(3, 6))
    assert whole[..., 6:].max() == 0.0
    np.testing.assert_allclose(long.attention("self", 1, rows=slice(3, 6), keys=slice(0, 6)), whole[..., :6], atol=1e-7)
    np.testing.assert_array_equal(long.attention("self", 1, heads=[2], rows=[4], keys=slice(0, 6)).shape, (1, 1, 6))
