"""Information flow (core.causal.flow reading a core.model.trace.Trace) against direct computations on plainly loaded models."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, BertModel

from core.causal.flow import Contributions, contributions, contributions_of, head_terms, proximity_shares, route_graph
from core.causal.flow_stack import TraceStack
from core.model.models import bundled_model_path, load_model
from core.model.trace import record
from tests.lm_factory import build_tiny_llama_lm
from tests.model_factory import build_tiny_bert, build_tiny_decoder, build_tiny_gpt2_lm

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


def _traced(model, text=TEXT):
    """(trace, its token ids): the trace the flow reads, and the ids the plain model is given."""
    trace = record(model, text)
    ids = model.tokenizer(text)["input_ids"]
    assert list(trace.tokens("self").ids) == ids
    return trace, ids


# the trace runs the model's sdpa attention, the plain model eager attention: float32 rounding apart (as tests/test_trace.py)
SDPA = {"rtol": 1e-4, "atol": 2e-5}


def test_the_flow_s_blocks_of_a_trace_equal_hooks_on_a_plain_model(tiny_decoder):
    folder, model = tiny_decoder
    trace, ids = _traced(model)
    stack = TraceStack(trace)
    plain, seen, out = _plain_pass(folder, ids)
    assert not stack.post_norm
    for layer in range(stack.num_layers):
        block = stack.block(layer)
        torch.testing.assert_close(block.pre, seen[("pre", layer)], **SDPA)
        torch.testing.assert_close(block.mid, seen[("mid", layer)], **SDPA)
        torch.testing.assert_close(block.post, seen[("post", layer)], **SDPA)
        torch.testing.assert_close(block.attention_output, seen[("attn", layer)], **SDPA)
        assert block.normed == hasattr(_blocks(plain)[layer], "pre_feedforward_layernorm")  # Gemma: a norm reads it
        np.testing.assert_allclose(stack.attention(layer), out.attentions[layer][0].numpy(), rtol=0, atol=1e-5)


def test_head_terms_add_up_to_the_attention_update_less_its_bias(tiny_decoder):
    folder, model = tiny_decoder
    recorded, ids = _traced(model)
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
    import core.causal.flow

    _, model = tiny_decoder
    recorded, ids = _traced(model)
    whole = contributions_of(recorded, ids)
    monkeypatch.setattr(core.causal.flow, "QUERY_CHUNK_CELLS", 1)  # one query at a time
    chunked = contributions_of(recorded, ids)
    np.testing.assert_allclose(chunked.attention, whole.attention, atol=1e-6)


def _reference_attention_shares(folder, ids):
    """``(attention [L, T, T, H], residual [L, T])`` by hand in float64 from a plainly loaded eager model: each
    (head, key) term A_h[i, j] · v_h[j] · W_Oʰ from the value projection's output (a hook), the weights the model
    returns and the output projection's weight (times the norm's frozen scale (mid − pre) / output on Gemma); its
    proximity max(0, ‖y‖₁ − ‖y − term‖₁) to y = the residual after attention, normalised with the residual's own."""
    plain, seen, out = _plain_pass(folder, ids)
    values: dict[int, torch.Tensor] = {}
    hooks = []
    for i, block in enumerate(_blocks(plain)):
        if hasattr(block, "attn"):  # GPT-2: c_attn's output is [q | k | v]
            hooks.append(block.attn.c_attn.register_forward_hook(
                lambda m, a, o, i=i: values.__setitem__(i, o[0].chunk(3, dim=-1)[2])))
        else:
            hooks.append(block.self_attn.v_proj.register_forward_hook(lambda m, a, o, i=i: values.__setitem__(i, o[0])))
    with torch.no_grad():
        plain(torch.tensor([ids]))
    for h in hooks:
        h.remove()
    config = plain.config
    heads = config.num_attention_heads
    attention, residual = [], []
    for layer, block in enumerate(_blocks(plain)):
        if hasattr(block, "attn"):
            w_o = block.attn.c_proj.weight.detach().double()  # Conv1D: [H·d, D]
        else:
            w_o = block.self_attn.o_proj.weight.detach().double().T  # [H·d, D]
        d = w_o.shape[0] // heads
        v = values[layer].double()  # [T, Hkv·d]
        groups = heads // (v.shape[1] // d)
        weights = out.attentions[layer][0].double()  # [H, T, T]
        pre, mid = seen[("pre", layer)].double(), seen[("mid", layer)].double()
        factor = torch.ones_like(mid)
        if hasattr(block, "pre_feedforward_layernorm"):
            factor = (mid - pre) / seen[("attn", layer)].double()
        terms = torch.stack([weights[h][:, :, None] * (v[:, (h // groups) * d:(h // groups + 1) * d]
                                                        @ w_o[h * d:(h + 1) * d])[None] for h in range(heads)], dim=2)
        terms = terms * factor[:, None, None, :]  # [T, T, H, D]
        size = mid.abs().sum(-1)
        near = (size[:, None, None] - (mid[:, None, None] - terms).abs().sum(-1)).clamp(min=0)
        near_residual = (size - (mid - pre).abs().sum(-1)).clamp(min=0)
        total = near.sum(dim=(1, 2)) + near_residual
        attention.append((near / total[:, None, None]).numpy())
        residual.append((near_residual / total).numpy())
    return np.stack(attention), np.stack(residual)


def test_contributions_equal_proximities_computed_by_hand_from_a_plain_model(tiny_decoder):
    folder, model = tiny_decoder
    ids = model.tokenizer(TEXT)["input_ids"]
    result = contributions(model, TEXT)
    attention, residual = _reference_attention_shares(folder, ids)
    np.testing.assert_allclose(result.attention, attention, atol=2e-5)
    np.testing.assert_allclose(result.attention_residual, residual, atol=2e-5)


# Post-norm encoders (BERT, MiniLM): each sub-block adds its update and then normalises, so the parts of an attention
# node are the block's input and each (head, key) term, of the sum before the norm.

@pytest.fixture(scope="module")
def tiny_bert_with_biases(tmp_path_factory):
    """(folder, LoadedModel) of a tiny random BERT whose biases and LayerNorm gains and shifts are random too (a
    zero bias would hide one left in or out)."""
    folder = build_tiny_bert(tmp_path_factory.mktemp("models") / "bert-biases")
    plain = BertModel.from_pretrained(folder)
    torch.manual_seed(1)
    with torch.no_grad():
        for name, param in plain.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name:
                param.copy_((1 if name.endswith("LayerNorm.weight") else 0) + 0.3 * torch.randn_like(param))
    plain.save_pretrained(folder)
    return folder, load_model(str(folder))


def _plain_bert_pass(folder, ids):
    """A plainly loaded eager BERT: per layer its input and output, the attention output projection's output, the
    inputs and outputs of the two LayerNorms, the value projection's output, and the attention weights."""
    plain = BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    seen: dict[tuple[str, int], torch.Tensor] = {}

    def keep(name, i, what):
        return lambda m, a, o: seen.__setitem__((name, i), (a[0] if what == "in" else o)[0])

    handles = []
    for i, layer in enumerate(plain.encoder.layer):
        handles += [layer.register_forward_pre_hook(lambda m, a, i=i: seen.__setitem__(("pre", i), a[0][0])),
                    layer.register_forward_hook(lambda m, a, o, i=i: seen.__setitem__(
                        ("post", i), (o[0] if isinstance(o, tuple) else o)[0])),
                    layer.attention.output.dense.register_forward_hook(keep("attn", i, "out")),
                    layer.attention.output.LayerNorm.register_forward_hook(keep("attention_sum", i, "in")),
                    layer.attention.output.LayerNorm.register_forward_hook(keep("mid", i, "out")),
                    layer.output.LayerNorm.register_forward_hook(keep("mlp_sum", i, "in")),
                    layer.attention.self.value.register_forward_hook(keep("value", i, "out"))]
    with torch.no_grad():
        out = plain(torch.tensor([ids]), output_attentions=True)
    for h in handles:
        h.remove()
    return plain, seen, out


def test_the_flow_s_blocks_of_a_post_norm_encoder_s_trace_equal_hooks_on_a_plain_bert(tiny_bert_with_biases):
    folder, model = tiny_bert_with_biases
    trace, ids = _traced(model)
    stack = TraceStack(trace)
    _, seen, out = _plain_bert_pass(folder, ids)
    assert stack.post_norm
    for layer in range(stack.num_layers):
        block = stack.block(layer)
        for name, got in (("pre", block.pre), ("mid", block.mid), ("post", block.post),
                          ("attention_sum", block.attention_sum), ("mlp_sum", block.mlp_sum)):
            torch.testing.assert_close(got, seen[(name, layer)], **SDPA)
        np.testing.assert_allclose(stack.attention(layer), out.attentions[layer][0].numpy(), rtol=0, atol=1e-5)


def test_bert_head_terms_add_up_to_the_attention_output_less_its_bias(tiny_bert_with_biases):
    folder, model = tiny_bert_with_biases
    recorded, ids = _traced(model)
    plain, seen, _ = _plain_bert_pass(folder, ids)
    for layer, block in enumerate(plain.encoder.layer):
        bias = block.attention.output.dense.bias
        assert bias.abs().max() > 0.1  # the comparison below would not see a bias left in otherwise
        torch.testing.assert_close(head_terms(recorded, layer).sum(dim=(1, 2)), seen[("attn", layer)] - bias,
                                   rtol=1e-4, atol=2e-5)


def test_bert_contributions_are_proximities_to_the_sum_before_each_norm(tiny_bert_with_biases):
    """By hand in float64 from the plain model's hooks: the attention node's parts are the block's input and each
    A_h[i, j] · v_h[j] · W_Oʰ, of y = the first LayerNorm's input; the MLP node's parts are the MLP's output (the
    second LayerNorm's input less the residual after attention) and that residual."""
    folder, model = tiny_bert_with_biases
    ids = model.tokenizer(TEXT)["input_ids"]
    result = contributions(model, TEXT)
    plain, seen, out = _plain_bert_pass(folder, ids)
    heads = plain.config.num_attention_heads
    for layer, block in enumerate(plain.encoder.layer):
        w_o = block.attention.output.dense.weight.detach().double().T  # [H·d, D]
        d = w_o.shape[0] // heads
        v, weights = seen[("value", layer)].double(), out.attentions[layer][0].double()
        terms = torch.stack([weights[h][:, :, None] * (v[:, h * d:(h + 1) * d] @ w_o[h * d:(h + 1) * d])[None]
                             for h in range(heads)], dim=2)  # [T, T, H, D]
        pre, y = seen[("pre", layer)].double(), seen[("attention_sum", layer)].double()
        near = (y.abs().sum(-1)[:, None, None] - (y[:, None, None] - terms).abs().sum(-1)).clamp(min=0)
        near_residual = (y.abs().sum(-1) - (y - pre).abs().sum(-1)).clamp(min=0)
        total = near.sum(dim=(1, 2)) + near_residual
        np.testing.assert_allclose(result.attention[layer], (near / total[:, None, None]).numpy(), atol=2e-5)
        np.testing.assert_allclose(result.attention_residual[layer], (near_residual / total).numpy(), atol=2e-5)
        mid, u = seen[("mid", layer)].double(), seen[("mlp_sum", layer)].double()
        near_mlp = (u.abs().sum(-1) - (mid).abs().sum(-1)).clamp(min=0)  # ‖u‖ − ‖u − (u − mid)‖
        near_mid = (u.abs().sum(-1) - (u - mid).abs().sum(-1)).clamp(min=0)
        np.testing.assert_allclose(result.mlp[layer], (near_mlp / (near_mlp + near_mid)).numpy(), atol=2e-5)
    assert (result.attention >= 0).all() and (result.mlp >= 0).all() and (result.mlp_residual >= 0).all()
    np.testing.assert_allclose(result.attention.sum(axis=(2, 3)) + result.attention_residual, 1, atol=1e-5)
    np.testing.assert_allclose(result.mlp + result.mlp_residual, 1, atol=1e-5)
    assert (result.attention[:, :, -1] > 0).any()  # an encoder's early queries read later keys too


@pytest.mark.integration
def test_minilm_head_terms_and_shares_against_hooks_on_the_plain_model(bundled):
    text = "The bank of the river was flooded after the storm."
    recorded, ids = _traced(bundled, text)
    result = contributions_of(recorded, ids)
    _, seen, _ = _plain_bert_pass(bundled_model_path(), ids)
    plain_bias = BertModel.from_pretrained(bundled_model_path()).encoder.layer
    for layer in range(recorded.num_layers("self")):
        bias = plain_bias[layer].attention.output.dense.bias.detach()
        torch.testing.assert_close(head_terms(recorded, layer).sum(dim=(1, 2)), seen[("attn", layer)] - bias,
                                   rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(torch.tensor(recorded.residual_post("self", layer)), seen[("post", layer)],
                                   rtol=0, atol=1e-5)
    assert (result.attention >= 0).all() and (result.mlp >= 0).all()
    np.testing.assert_allclose(result.attention.sum(axis=(2, 3)) + result.attention_residual, 1, atol=1e-5)
    np.testing.assert_allclose(result.mlp + result.mlp_residual, 1, atol=1e-5)
    graph = route_graph(result, len(ids) - 1)
    assert graph.edges and all(e.weight > graph.threshold for e in graph.edges)
