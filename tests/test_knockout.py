"""Issue 37: one way to knock a head out (``core.model.recording.Recorder(replace=…)``, which ``core.causal.effects`` uses) and one
lookup of a model's parts (``core.model.parts``). References: the same checkpoint loaded plainly with eager attention, a
hand-written zeroing pre-hook on its output projection (``tests.plain_heads.zero_heads_hook``), and module paths
written out here per family, as the app no longer needs to."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM

from core.causal.effects import ablate_heads, ablation
from core.model.hooks import hooked, replacing_input
from core.model.inference import analyze
from core.model.models import load_model
from core.model.parts import parts_of
from core.model.recording import Recorder
from core.outputs.predictions import load_language_model
from tests.lm_factory import build_tiny_llama_lm
from tests.plain_heads import zero_heads_hook

TEXT = "the cat sat on the mat and it was happy"
HEADS = [(0, 1), (1, 3)]
HEAD_DIM = 8  # the tiny models: hidden 32, 4 heads


def _plain_run(plain, hooks, **inputs):
    """The plain model's output with each ``(module, pre-hook)`` in ``hooks`` for one pass (registered here, in the
    test: the independent reference)."""
    handles = [module.register_forward_pre_hook(hook) for module, hook in hooks]
    try:
        with torch.no_grad():
            return plain(**inputs, output_hidden_states=True)
    finally:
        for handle in handles:
            handle.remove()


def _zeroing(projection_of, heads=HEADS):
    """``(module, hook)`` pairs zeroing ``heads`` before ``projection_of(layer)`` of the plain model."""
    layers = sorted({layer for layer, _ in heads})
    return [(projection_of(layer), zero_heads_hook([h for lay, h in heads if lay == layer], HEAD_DIM)) for layer in layers]


# by hand, per family: the module whose input is the heads' outputs side by side
PLAIN_PROJECTIONS = {
    "bert": lambda plain, layer: plain.encoder.layer[layer].attention.output.dense,
    "gpt2": lambda plain, layer: plain.h[layer].attn.c_proj,
}


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_ablate_heads_equals_zeroing_by_hand(family, request):
    model = request.getfixturevalue(f"tiny_{family}")
    plain = AutoModel.from_pretrained(request.getfixturevalue(f"tiny_{family}_dir"), attn_implementation="eager").eval()
    analysis = analyze(model, TEXT)
    ids = torch.tensor([analysis.input_ids])
    expected = _plain_run(plain, _zeroing(lambda layer: PLAIN_PROJECTIONS[family](plain, layer)), input_ids=ids)
    got = ablate_heads(model, TEXT, HEADS)
    np.testing.assert_allclose(got.hidden_states, torch.stack(expected.hidden_states, 1)[0].numpy(), atol=1e-5)
    assert np.abs(got.hidden_states - analysis.hidden_states).max() > 1e-4  # the knock-out changed something


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    folder = build_tiny_llama_lm(tmp_path_factory.mktemp("knockout") / "llama")
    plain = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    return load_language_model(load_model(str(folder))), plain


def test_llama_knock_out_equals_zeroing_by_hand(tiny_llama):
    lm, plain = tiny_llama
    ids = lm.tokenizer(TEXT, return_tensors="pt")["input_ids"]
    expected = _plain_run(plain, _zeroing(lambda layer: plain.model.layers[layer].self_attn.o_proj), input_ids=ids)
    with torch.no_grad(), ablation(lm, HEADS):
        got = lm.model(input_ids=ids).logits
    with torch.no_grad():
        untouched = lm.model(input_ids=ids).logits  # after the block: nothing left changed
    np.testing.assert_allclose(got.numpy(), expected.logits.numpy(), atol=1e-5)
    assert (got - untouched).abs().max() > 1e-4


def test_bart_cross_attention_heads_knocked_out_through_the_recorder(tiny_bart, tiny_bart_dir):
    plain = AutoModelForSeq2SeqLM.from_pretrained(tiny_bart_dir, attn_implementation="eager").eval()
    source = tiny_bart.tokenizer(TEXT, return_tensors="pt")["input_ids"]
    target = tiny_bart.tokenizer("a cat on a mat", return_tensors="pt")["input_ids"]
    inputs = {"input_ids": source, "decoder_input_ids": target}
    expected = _plain_run(plain, _zeroing(lambda layer: plain.model.decoder.layers[layer].encoder_attn.out_proj),
                          **inputs)
    with torch.no_grad(), Recorder(tiny_bart.model, keep_tensors=False,
                                   replace={("cross", layer, head): None for layer, head in HEADS}):
        got = tiny_bart.model(**inputs)
    with torch.no_grad():
        plain_out = plain(**inputs)
    np.testing.assert_allclose(got.logits.numpy(), expected.logits.numpy(), atol=1e-5)
    # the encoder has no cross-attention: it is untouched; the decoder's output is changed
    np.testing.assert_allclose(got.encoder_last_hidden_state.numpy(), plain_out.encoder_last_hidden_state.numpy(), atol=1e-6)
    assert (got.logits - plain_out.logits).abs().max() > 1e-4


def test_a_function_replaces_a_head_with_its_mean_over_tokens(tiny_gpt2, tiny_gpt2_dir):
    plain = AutoModel.from_pretrained(tiny_gpt2_dir, attn_implementation="eager").eval()
    ids = torch.tensor([analyze(tiny_gpt2, TEXT).input_ids])

    def mean_hook(_module, args):  # head 2 of layer 1: its slice averaged over the tokens, by hand
        x = args[0].clone()
        x[..., 2 * HEAD_DIM:3 * HEAD_DIM] = x[..., 2 * HEAD_DIM:3 * HEAD_DIM].mean(dim=1, keepdim=True)
        return (x,)

    expected = _plain_run(plain, [(plain.h[1].attn.c_proj, mean_hook)], input_ids=ids)
    with torch.no_grad(), Recorder(tiny_gpt2.model, keep_tensors=False,
                                   replace={(1, 2): lambda out: out.mean(dim=1, keepdim=True).expand_as(out)}):
        got = tiny_gpt2.model(input_ids=ids)
    np.testing.assert_allclose(got.last_hidden_state.numpy(), expected.last_hidden_state.numpy(), atol=1e-5)


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_parts_are_the_modules_named_by_hand(family, request):
    model = request.getfixturevalue(f"tiny_{family}").model
    parts = parts_of(model)
    assert [p.output_projection for p in parts.layers] == [PLAIN_PROJECTIONS[family](model, layer) for layer in range(2)]
    assert (parts.heads, parts.head_dim) == (4, HEAD_DIM)
    if family == "gpt2":
        assert [p.mlp for p in parts.layers] == [model.h[layer].mlp for layer in range(2)]
        assert parts.final_norm is model.ln_f
    else:
        assert parts.final_norm is None  # BERT normalises inside its blocks
        assert [p.mlp_output for p in parts.layers] == [model.encoder.layer[layer].output.dense for layer in range(2)]


def test_parts_of_a_llama_lm_and_of_bart_stacks(tiny_llama, tiny_bart):
    lm, _ = tiny_llama
    parts = parts_of(lm.model)
    layers = lm.model.model.layers
    assert [p.output_projection for p in parts.layers] == [block.self_attn.o_proj for block in layers]
    assert [p.mlp for p in parts.layers] == [block.mlp for block in layers]
    assert parts.final_norm is lm.model.model.norm and parts.unembedding is lm.model.lm_head
    assert parts.heads == 4 and parts.head_dim == HEAD_DIM
    stacks = parts_of(tiny_bart.model).stacks
    decoder = tiny_bart.model.model.decoder.layers
    assert [p.output_projection for p in stacks["cross"]] == [block.encoder_attn.out_proj for block in decoder]
    assert [p.output_projection for p in stacks["decoder"]] == [block.self_attn.out_proj for block in decoder]
    assert [p.output_projection for p in stacks["encoder"]] == [b.self_attn.out_proj for b in tiny_bart.model.model.encoder.layers]


def test_hooks_act_only_in_their_thread_and_are_removed_after_an_error():
    linear = torch.nn.Linear(2, 2)
    x = torch.ones(1, 2)
    with torch.no_grad():
        plain = linear(x)
    doubled = replacing_input(linear, lambda v: 2 * v)
    seen = {}
    with torch.no_grad(), hooked([doubled]):
        inside = linear(x)
        worker = threading.Thread(target=lambda: seen.setdefault("other", linear(x)))
        worker.start()
        worker.join()
    assert torch.allclose(inside, linear(2 * x)) and not torch.allclose(inside, plain)
    assert torch.equal(seen["other"], plain)
    with pytest.raises(RuntimeError), hooked([doubled]):
        raise RuntimeError("a pass that fails")
    assert not linear._forward_pre_hooks and torch.equal(linear(x), plain)
