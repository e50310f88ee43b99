"""Issue 37 item 1: every family through the one recording attention function (core.model.recording).

BERT, RoBERTa, ELECTRA, DistilBERT (no ``layer_idx``), GPT-2 and the decoder families are loaded with the
recording implementation, and what a recorded pass holds equals an independent reference: the same checkpoint
loaded plainly with ``attn_implementation="eager"`` and ``output_attentions=True``, the attention module's input
caught by a forward pre-hook and each head's projections done by hand in numpy (``tests/plain_heads.py``), on a
padded batch of two texts.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoModelForSeq2SeqLM

from core.attention_heads.inside_head import compute_head
from core.model.inference import analyze
from core.model.models import load_model
from core.model.recording import IMPLEMENTATION, Recorder, is_recordable
from tests import model_factory
from tests.plain_heads import plain_layer, softmax_weights

TEXTS = ["I will hike along the bank of a river.", "the cat sat"]
ENCODERS = {
    "bert": model_factory.build_tiny_bert,
    "roberta": model_factory.build_tiny_roberta,
    "electra": model_factory.build_tiny_electra,
    "distilbert": model_factory.build_tiny_distilbert,
    "gpt2": model_factory.build_tiny_gpt2,
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``built(name)``: (LoadedModel, the same checkpoint loaded plainly with eager attention), once per module."""
    cache = {}

    def get(name):
        if name not in cache:
            root = tmp_path_factory.mktemp("families") / name
            folder = ENCODERS[name](root) if name in ENCODERS else model_factory.build_tiny_decoder(root, name)
            cache[name] = (load_model(str(folder)), AutoModel.from_pretrained(folder, attn_implementation="eager").eval())
        return cache[name]

    return get


@pytest.mark.parametrize("name", [*ENCODERS, "llama", "qwen2", "gemma"])
def test_every_family_is_loaded_with_the_recording_attention(built, name):
    model, _ = built(name)
    assert model.model.config._attn_implementation == IMPLEMENTATION
    assert is_recordable(model.model)


@pytest.mark.integration
def test_the_bundled_minilm_is_recordable():
    assert is_recordable(load_model().model)


def _batch(model):
    """Two texts of different lengths, padded on the right (``load_model``'s tokenizer)."""
    encoding = model.tokenizer(TEXTS, padding=True, return_tensors="pt")
    assert not bool(encoding["attention_mask"].all())  # the second text is padded
    return {k: encoding[k] for k in ("input_ids", "attention_mask")}


@pytest.mark.parametrize("name", list(ENCODERS))
def test_a_recorded_padded_batch_equals_the_plain_eager_model(built, name):
    """Weights, queries, keys, values and the module's input of every layer, on a padded batch of two texts."""
    model, plain = built(name)
    inputs = _batch(model)
    with torch.no_grad(), Recorder(model.model) as rec:
        out = model.model(**inputs, output_attentions=True)
    assert sorted(rec.records) == list(range(model.num_layers))
    real = inputs["attention_mask"].numpy().astype(bool)  # [B, T]
    for layer, record in rec.records.items():
        ref = plain_layer(plain, model.num_heads, layer, inputs)
        np.testing.assert_allclose(record.weights.numpy(), ref["weights"], atol=1e-6)
        np.testing.assert_allclose(out.attentions[layer].numpy(), ref["weights"], atol=1e-6)
        for got, expected in ((record.queries, ref["q"]), (record.keys, ref["k"]), (record.values, ref["v"]),
                              (record.inputs, ref["x"])):
            np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)
        # the weights from the hand-projected queries and keys, padding keys masked, causal for a decoder
        t = real.shape[1]
        keep = real[:, None, None, :] & (np.tril(np.ones((t, t), dtype=bool)) if model.is_decoder else True)
        by_hand = softmax_weights(ref["q"], ref["k"], ref["q"].shape[-1] ** -0.5, keep)
        rows = real[:, None, :, None] & np.ones_like(by_hand, dtype=bool)  # rows of padding are not compared
        np.testing.assert_allclose(record.weights.numpy()[rows], by_hand[rows], atol=1e-6)


@pytest.mark.parametrize("name", list(ENCODERS))
def test_compute_head_equals_the_plain_model_taken_apart_by_hand(built, name):
    model, plain = built(name)
    analysis = analyze(model, TEXTS[0])
    ids = {"input_ids": torch.tensor([analysis.input_ids])}
    for layer in range(model.num_layers):
        ref = plain_layer(plain, model.num_heads, layer, ids)
        for head in range(model.num_heads):
            step = compute_head(model, analysis, layer, head)
            np.testing.assert_allclose(step.layer_input, ref["x"][0], rtol=1e-5, atol=1e-5)
            for got, key in ((step.queries, "q"), (step.keys, "k"), (step.values, "v")):
                np.testing.assert_allclose(got, ref[key][0, head], rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(step.weights, ref["weights"][0, head], atol=1e-6)


@pytest.mark.parametrize("name", ["bert", "distilbert", "gpt2"])
def test_recorder_replace_knocks_a_head_out_as_a_hook_on_the_plain_model_does(built, name):
    """Replacing head 2 of layer 1 by zeros equals zeroing its slice of the output projection's input."""
    from tests.plain_heads import attention_module

    model, plain = built(name)
    ids = torch.tensor([model.tokenizer(TEXTS[0])["input_ids"]])
    with torch.no_grad(), Recorder(model.model, keep_tensors=False, replace={(1, 2): None}):
        knocked = model.model(input_ids=ids).last_hidden_state.numpy()
    module = attention_module(plain, 1)
    projection = (module.c_proj if hasattr(module, "c_proj") else module.out_lin if hasattr(module, "out_lin")
                  else plain.encoder.layer[1].attention.output.dense)
    d = model.hidden_size // model.num_heads

    def zero_head(_module, args):
        x = args[0].clone()
        x[..., 2 * d:3 * d] = 0.0
        return (x,)

    handle = projection.register_forward_pre_hook(zero_head)
    try:
        with torch.no_grad():
            expected = plain(input_ids=ids).last_hidden_state.numpy()
    finally:
        handle.remove()
    with torch.no_grad():
        untouched = model.model(input_ids=ids).last_hidden_state.numpy()
    assert np.abs(untouched - expected).max() > 1e-3  # the knock-out changes something
    np.testing.assert_allclose(knocked, expected, atol=1e-5)


def test_models_whose_modules_compute_attention_themselves_stay_eager(tmp_path):
    """MegatronBERT accepts the implementation name but never calls it: the probe finds that and loads it eager."""
    model = load_model(str(model_factory.build_tiny_megatron_bert(tmp_path / "megatron")))
    assert model.model.config._attn_implementation == "eager"
    assert not is_recordable(model.model)


def test_encoder_decoder_stacks_are_told_apart(tiny_seq2seq):
    """Encoder, decoder self- and cross-attention share ``layer_idx`` values; their records are kept apart and
    equal the plain eager model's encoder, decoder and cross-attention weights."""
    model = tiny_seq2seq
    assert is_recordable(model.model)
    src = model.tokenizer(TEXTS, padding=True, return_tensors="pt")
    decoder_ids = torch.tensor([[0, 5, 6], [0, 7, 8]])
    inputs = {"input_ids": src["input_ids"], "attention_mask": src["attention_mask"], "decoder_input_ids": decoder_ids}
    with torch.no_grad(), Recorder(model.model) as rec:
        model.model(**inputs)
    plain = AutoModelForSeq2SeqLM.from_pretrained(model.source, attn_implementation="eager").eval()
    with torch.no_grad():
        out = plain(**inputs, output_attentions=True)
    for stack, expected in (("encoder", out.encoder_attentions), ("decoder", out.decoder_attentions),
                            ("cross", out.cross_attentions)):
        assert sorted(rec.stacks[stack]) == list(range(len(expected)))
        for layer, weights in enumerate(expected):
            np.testing.assert_allclose(rec.stacks[stack][layer].weights.numpy(), weights.numpy(), atol=1e-6)


@pytest.mark.parametrize("stack", ["encoder", "decoder", "cross"])
def test_pair_heads_equal_the_plain_model_taken_apart_by_hand(tiny_seq2seq, stack):
    """core.attention_heads.inside_pair_head reads every stack from the recorded pass: its queries, keys and values equal the plain
    eager model's projections of the inputs a hook caught (numpy by hand), its weights the plain model's own."""
    from core.attention_heads.inside_pair_head import compute_pair_head
    from core.model.seq2seq import analyze_pair

    model = tiny_seq2seq
    pair = analyze_pair(model, TEXTS[0], "the cat sat on the mat")
    plain = AutoModelForSeq2SeqLM.from_pretrained(model.source, attn_implementation="eager").eval()
    t5 = hasattr(plain, "encoder") and hasattr(plain.encoder, "block")
    layer = 1
    if t5:
        blocks = (plain.encoder if stack == "encoder" else plain.decoder).block
        module = blocks[layer].layer[1].EncDecAttention if stack == "cross" else blocks[layer].layer[0].SelfAttention
        names = ("q", "k", "v")
    else:
        blocks = (plain.model.encoder if stack == "encoder" else plain.model.decoder).layers
        module = blocks[layer].encoder_attn if stack == "cross" else blocks[layer].self_attn
        names = ("q_proj", "k_proj", "v_proj")
    seen = {}

    def keep_inputs(_module, args, kwargs):
        seen["x"] = kwargs.get("hidden_states", args[0] if args else None)
        seen["kv"] = kwargs.get("key_value_states")

    handle = module.register_forward_pre_hook(keep_inputs, with_kwargs=True)
    try:
        with torch.no_grad():
            out = plain(input_ids=torch.tensor([pair.source.input_ids]),
                        decoder_input_ids=torch.tensor([pair.target.input_ids]), output_attentions=True)
    finally:
        handle.remove()
    x = seen["x"][0].double().numpy()
    memory = x if seen["kv"] is None else seen["kv"][0].double().numpy()

    def project(name, inputs, head, d):
        linear = getattr(module, name)
        y = inputs @ linear.weight.detach().double().numpy().T + (0 if linear.bias is None else linear.bias.detach().double().numpy())
        return y[:, head * d:(head + 1) * d]

    expected = {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions, "cross": out.cross_attentions}[stack]
    for head in range(model.num_heads):
        step = compute_pair_head(model, pair, stack, layer, head)
        d = step.queries.shape[1]
        np.testing.assert_allclose(step.queries, project(names[0], x, head, d), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(step.keys, project(names[1], memory, head, d), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(step.values, project(names[2], memory, head, d), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(step.weights, expected[layer][0, head].numpy(), atol=1e-5)
