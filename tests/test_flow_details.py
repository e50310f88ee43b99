"""The details of a route's edges and nodes (core.causal.flow_details) against hooks on plainly loaded tiny models: a
head's write from one key position through the frozen final norm and the unembedding, and an MLP's neurons, whose
terms add up (with the output bias) to the MLP's output."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from core.causal.flow_details import head_write, neuron_terms, top_neurons
from core.causal.unembedding import lens_logits, top_tokens, written_logits
from core.model.models import load_model
from core.model.tokens import decoded_tokens, readable_token
from core.model.trace import record
from core.outputs.predictions import load_language_model
from tests.lm_factory import build_tiny_llama_lm
from tests.model_factory import build_tiny_decoder, build_tiny_gpt2_lm

TEXT = "the cat sat on the mat and the dog sat on the log"


@pytest.fixture(scope="module", params=["llama", "gpt2", "gemma3_text"])
def tiny_decoder(request, tmp_path_factory):
    """(folder, LoadedModel): a Llama (no MLP bias), a GPT-2 (Conv1D maps with biases) and a Gemma 3 (a norm on the
    MLP's output before it joins the stream)."""
    folder = tmp_path_factory.mktemp("details") / request.param
    {"llama": build_tiny_llama_lm, "gpt2": build_tiny_gpt2_lm}.get(
        request.param, lambda f: build_tiny_decoder(f, request.param))(folder)
    if request.param == "gpt2":  # a random init leaves every bias at 0, which would hide a lost bias
        plain = AutoModelForCausalLM.from_pretrained(folder)
        torch.manual_seed(1)
        with torch.no_grad():
            for block in plain.transformer.h:
                block.mlp.c_proj.bias.copy_(torch.randn_like(block.mlp.c_proj.bias))
        plain.save_pretrained(folder)
    return request.param, folder, load_model(str(folder))


def _blocks(plain):
    return plain.transformer.h if hasattr(plain, "transformer") else plain.model.layers


def _mlp_pass(plain, ids, layer):
    """What block ``layer``'s MLP returned, the input of its output map (its neurons) and, for Gemma, what the norm on
    the MLP's output returned: ``{"out", "neurons", "normed"}``, each ``[T, ·]``."""
    block, seen = _blocks(plain)[layer], {}
    out_map = block.mlp.c_proj if hasattr(block.mlp, "c_proj") else block.mlp.down_proj
    hooks = [block.mlp.register_forward_hook(lambda m, a, o: seen.__setitem__("out", o[0])),
             out_map.register_forward_pre_hook(lambda m, a: seen.__setitem__("neurons", a[0][0]))]
    if hasattr(block, "post_feedforward_layernorm"):
        hooks.append(block.post_feedforward_layernorm.register_forward_hook(
            lambda m, a, o: seen.__setitem__("normed", o[0])))
    with torch.no_grad():
        plain(torch.tensor([ids]))
    for hook in hooks:
        hook.remove()
    weight = out_map.weight.detach().double()
    seen["rows"] = weight if hasattr(block.mlp, "c_proj") else weight.T  # [F, D]: Conv1D keeps W as [in, out]
    return seen


def test_neuron_terms_add_up_with_the_bias_to_the_mlp_output(tiny_decoder):
    family, folder, model = tiny_decoder
    ids = model.tokenizer(TEXT)["input_ids"]
    recorded = record(model, TEXT)
    plain = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    layer, position = 1, len(ids) - 2
    seen = _mlp_pass(plain, ids, layer)
    terms, bias = neuron_terms(model, recorded, layer, position)
    expected = seen["normed" if family == "gemma3_text" else "out"][position]
    torch.testing.assert_close(terms.sum(0) + bias, expected.float(), rtol=1e-4, atol=1e-5)
    if family == "gpt2":
        assert bias.abs().max() > 0  # the Conv1D's bias is a part of the sum, not lost
    if family != "gemma3_text":  # each term is the neuron's activation times its output row, by hand
        by_hand = seen["neurons"][position].double()[:, None] * seen["rows"]
        torch.testing.assert_close(terms.double(), by_hand, rtol=1e-4, atol=1e-6)
        # the shares: proximity of each term to the output, normalised over the neurons, by numpy
        y, z = expected.double().numpy(), by_hand.numpy()
        near = np.maximum(0, np.abs(y).sum() - np.abs(y[None] - z).sum(-1))
        shares = near / near.sum()
        top = top_neurons(model, recorded, layer, position, k=5)
        assert list(top.index) == list(np.argsort(-shares, kind="stable")[:5])
        np.testing.assert_allclose(top.share, shares[top.index], rtol=1e-3, atol=1e-6)
        np.testing.assert_allclose(top.activation, seen["neurons"][position, top.index].numpy(), rtol=1e-5)
        assert top.count == z.shape[0]
        if family == "llama":  # the page projects the top neurons' writes in one call: each row as on its own
            lm, final = load_language_model(model), torch.tensor(recorded.residual_post("self", recorded.num_layers("self") - 1)[position])
            rows = written_logits(lm, top.terms, final)
            np.testing.assert_allclose(rows[1], written_logits(lm, top.terms[1], final), rtol=1e-5, atol=1e-6)


def test_promoted_tokens_of_a_head_from_one_key_equal_its_term_through_the_frozen_final_norm(tmp_path):
    folder = build_tiny_llama_lm(tmp_path / "llama")
    model = load_model(str(folder))
    lm = load_language_model(model)
    ids = model.tokenizer(TEXT)["input_ids"]
    recorded = record(model, TEXT)
    plain = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    layer, query, key, head = 1, len(ids) - 3, 4, 2
    attention, seen = plain.model.layers[layer].self_attn, {}
    hooks = [attention.v_proj.register_forward_hook(lambda m, a, o: seen.__setitem__("v", o[0])),
             plain.model.norm.register_forward_pre_hook(lambda m, a: seen.__setitem__("final", a[0][0]))]
    with torch.no_grad():
        out = plain(torch.tensor([ids]), output_attentions=True)
    for hook in hooks:
        hook.remove()
    d, groups = attention.head_dim, plain.config.num_attention_heads // plain.config.num_key_value_heads
    value = seen["v"][key, (head // groups) * d:(head // groups + 1) * d].double()
    weight = out.attentions[layer][0, head, query, key].double()
    term = weight * value @ attention.o_proj.weight.detach()[:, head * d:(head + 1) * d].double().T  # [D]
    x, norm = seen["final"][query].double(), plain.model.norm
    frozen = norm.weight.detach().double() * term / torch.sqrt((x**2).mean() + norm.variance_epsilon)
    expected = (frozen @ plain.lm_head.weight.detach().double().T).numpy()

    write = head_write(recorded, layer, query, key, head)
    torch.testing.assert_close(write.double(), term, rtol=1e-4, atol=1e-6)
    last = torch.tensor(recorded.residual_post("self", recorded.num_layers("self") - 1)[query])
    got = written_logits(lm, write, last)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
    assert [tok for tok, _ in top_tokens(lm, got, 5)] == [  # labelled by the app's one rule (issue 50 item 10)
        readable_token(t) for t in decoded_tokens(lm.tokenizer, np.argsort(expected)[::-1][:5].tolist())]
    assert [tok for tok, _ in top_tokens(lm, got, 5, lowest=True)] == [
        readable_token(t) for t in decoded_tokens(lm.tokenizer, np.argsort(expected)[:5].tolist())]
    # the logit lens of the last representation is the model's own logits there
    np.testing.assert_allclose(lens_logits(lm, last), out.logits[0, query].numpy(),
                               rtol=1e-4, atol=1e-4)
