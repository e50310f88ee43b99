"""Information flow (core.flow, core.recorded_pass) against direct computations on plainly loaded models."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from core.flow import Contributions, contributions, contributions_of, head_terms, proximity_shares, route_graph
from core.models import load_model
from core.recorded_pass import record_pass
from tests.lm_factory import build_tiny_llama_lm
from tests.model_factory import build_tiny_decoder, build_tiny_gpt2_lm

TEXT = "the cat sat on the mat and the dog sat on the log"


@pytest.fixture(scope="module", params=["llama", "gemma3_text", "qwen2", "gpt2"])
def tiny_decoder(request, tmp_path_factory):
    """(folder, LoadedModel): a Llama with grouped-query heads, a Gemma 3 (norms on the attention and MLP outputs,
    sliding window, q/k-norm), a Qwen2 (biases on q, k, v) and a GPT-2 (Conv1D projections with biases)."""
    folder = tmp_path_factory.mktemp("models") / request.param
    if request.param == "llama":
        build_tiny_llama_lm(folder)
    elif request.param == "gpt2":
        build_tiny_gpt2_lm(folder)
    else:
        build_tiny_decoder(folder, request.param)
    return folder, load_model(str(folder))


def _blocks(plain):
    return plain.transformer.h if hasattr(plain, "transformer") else plain.model.layers


def _attention(block):
    return block.attn if hasattr(block, "attn") else block.self_attn


def _output_bias(block):
    return block.attn.c_proj.bias if hasattr(block, "attn") else block.self_attn.o_proj.bias


def _plain_pass(folder, ids):
    """A plainly loaded eager model: every block's input, the attention module's output, the residual after
    attention and after the MLP, from forward hooks on the modules each family names."""
    plain = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    seen: dict[tuple[str, int], torch.Tensor] = {}
    handles = []
    for i, block in enumerate(_blocks(plain)):
        handles.append(block.register_forward_pre_hook(lambda m, a, i=i: seen.__setitem__(("pre", i), a[0][0])))
        handles.append(_attention(block).register_forward_hook(lambda m, a, o, i=i: seen.__setitem__(("attn", i), o[0][0])))
        after_attention = (getattr(block, "pre_feedforward_layernorm", None) or getattr(block, "ln_2", None)
                           or block.post_attention_layernorm)
        handles.append(after_attention.register_forward_pre_hook(lambda m, a, i=i: seen.__setitem__(("mid", i), a[0][0])))
        handles.append(block.register_forward_hook(lambda m, a, o, i=i: seen.__setitem__(
            ("post", i), (o[0] if isinstance(o, tuple) else o)[0])))
    with torch.no_grad():
        out = plain(torch.tensor([ids]), output_attentions=True)
    for h in handles:
        h.remove()
    return plain, seen, out


def test_recorded_pass_equals_hooks_on_a_plain_model(tiny_decoder):
    folder, model = tiny_decoder
    ids = model.tokenizer(TEXT)["input_ids"]
    recorded = record_pass(model, ids)
    _, seen, out = _plain_pass(folder, ids)
    for layer in range(recorded.num_layers):
        torch.testing.assert_close(recorded.residual_pre[layer], seen[("pre", layer)], rtol=0, atol=1e-6)
        torch.testing.assert_close(recorded.residual_mid[layer], seen[("mid", layer)], rtol=0, atol=1e-6)
        torch.testing.assert_close(recorded.residual_post[layer], seen[("post", layer)], rtol=0, atol=1e-6)
        torch.testing.assert_close(recorded.attention_output[layer], seen[("attn", layer)], rtol=0, atol=1e-6)
        np.testing.assert_allclose(recorded.attention(layer), out.attentions[layer][0].numpy(), rtol=0, atol=1e-6)


def test_head_terms_add_up_to_the_attention_update_less_its_bias(tiny_decoder):
    folder, model = tiny_decoder
    ids = model.tokenizer(TEXT)["input_ids"]
    recorded = record_pass(model, ids)
    plain, seen, _ = _plain_pass(folder, ids)
    for layer, block in enumerate(_blocks(plain)):
        bias = _output_bias(block)
        before_norm = head_terms(recorded, layer, through_norm=False).sum(dim=(1, 2))  # [T, D]
        torch.testing.assert_close(before_norm, seen[("attn", layer)] - (0 if bias is None else bias), rtol=1e-4, atol=2e-5)
        total = head_terms(recorded, layer).sum(dim=(1, 2))
        if hasattr(block, "pre_feedforward_layernorm"):  # Gemma: the update is the norm of the attention output
            expected = seen[("mid", layer)] - seen[("pre", layer)]
        else:
            expected = seen[("attn", layer)] - (0 if bias is None else bias)
        torch.testing.assert_close(total, expected, rtol=1e-4, atol=2e-5)


def test_each_node_s_contributions_are_shares_that_add_up_to_one(tiny_decoder):
    _, model = tiny_decoder
    result = contributions(model, TEXT)
    t = len(result.tokens)
    assert result.attention.shape == (result.num_layers, t, t, model.num_heads)
    assert (result.attention >= 0).all() and (result.attention_residual >= 0).all()
    assert (result.mlp >= 0).all() and (result.mlp_residual >= 0).all()
    np.testing.assert_allclose(result.attention.sum(axis=(2, 3)) + result.attention_residual, 1, atol=1e-5)
    np.testing.assert_allclose(result.mlp + result.mlp_residual, 1, atol=1e-5)
    later_keys = np.triu(np.ones((t, t), bool), k=1)  # a decoder's query never reads a later key
    assert (result.attention[:, later_keys] == 0).all()


def test_proximity_shares_by_hand():
    # y = (3, 1) from parts a = (2, 0), b = (1, 1): ‖y‖₁ = 4; ‖y − a‖₁ = 2, ‖y − b‖₁ = 2 → proximities 2 and 2
    # c = (-3, 0) lies away from y: ‖y − c‖₁ = 7 > 4 → proximity 0
    parts = torch.tensor([[2.0, 0.0], [1.0, 1.0], [-3.0, 0.0]])
    shares = proximity_shares(parts, torch.tensor([3.0, 1.0]))
    np.testing.assert_allclose(shares.numpy(), [0.5, 0.5, 0.0])


def _full_edges(c: Contributions):
    """Every edge of the full graph as (source, target, kind, weight), built directly from the arrays."""
    layers, t = c.attention.shape[:2]
    edges = []
    for layer in range(layers):
        for i in range(t):
            def src(p, layer=layer):
                return ("block", layer - 1, p) if layer else ("embedding", -1, p)
            edges.append((src(i), ("attention", layer, i), "residual", c.attention_residual[layer, i]))
            for j in range(t):
                edges.append((src(j), ("attention", layer, i), "attention", c.attention[layer, i, j].sum()))
            edges.append((("attention", layer, i), ("mlp", layer, i), "mlp", c.mlp[layer, i]))
            edges.append((("mlp", layer, i), ("block", layer, i), "mlp", c.mlp[layer, i]))
            edges.append((("attention", layer, i), ("block", layer, i), "residual", c.mlp_residual[layer, i]))
    return edges


@pytest.mark.parametrize("threshold", [0.01, 0.04, 0.2])
def test_route_graph_keeps_exactly_the_edges_above_threshold_that_reach_the_chosen_node(threshold, tiny_decoder):
    _, model = tiny_decoder
    c = contributions(model, TEXT)
    position = len(c.tokens) - 1
    strong = [e for e in _full_edges(c) if e[3] > threshold]
    reach, frontier = {("block", c.num_layers - 1, position)}, [("block", c.num_layers - 1, position)]
    while frontier:  # breadth-first, backwards
        node = frontier.pop()
        for source, target, _, _ in strong:
            if target == node and source not in reach:
                reach.add(source)
                frontier.append(source)
    expected = {(s, t, k) for s, t, k, _ in strong if t in reach}
    graph = route_graph(c, position, threshold)
    assert {(e.source, e.target, e.kind) for e in graph.edges} == expected
    for edge in graph.edges:
        if edge.kind == "attention":
            assert sum(edge.heads) == pytest.approx(edge.weight, abs=1e-5)


def test_contributions_of_a_text_longer_than_one_chunk_equal_those_computed_at_once(tiny_decoder, monkeypatch):
    import core.flow

    _, model = tiny_decoder
    ids = model.tokenizer(TEXT)["input_ids"]
    recorded = record_pass(model, ids)
    whole = contributions_of(recorded, ids)
    monkeypatch.setattr(core.flow, "QUERY_CHUNK_CELLS", 1)  # one query at a time
    chunked = contributions_of(recorded, ids)
    np.testing.assert_allclose(chunked.attention, whole.attention, atol=1e-6)
