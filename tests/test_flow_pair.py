"""Information flow through an encoder-decoder (core.causal.flow_pair, read from the pair's trace) and its
cross-attention against hooks on plainly loaded tiny BART and T5."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from transformers import AutoModelForSeq2SeqLM

from core.causal.flow import route_graph
from core.causal.flow_details import neuron_terms
from core.causal.flow_pair import decoder_logits, pair_contributions, pair_contributions_of, pair_pass, pair_top_neurons, with_neurons
from core.causal.flow_pair_blocks import BlockCalls, cross_terms
from core.model.models import load_model
from core.model.recording import UnsupportedArchitecture
from core.model.trace import record
from tests.model_factory import build_tiny_bart, build_tiny_t5

SOURCE, TARGET = "the cat sat on the mat", "the dog sat"


@pytest.fixture(scope="module", params=["bart", "t5"])
def tiny_pair(request, tmp_path_factory):
    """(folder, LoadedModel): a tiny BART (post-norm; here with random biases, which a zero init would hide) and a
    tiny T5 (pre-norm sub-layers, no biases)."""
    folder = tmp_path_factory.mktemp("models") / request.param
    (build_tiny_bart if request.param == "bart" else build_tiny_t5)(folder)
    if request.param == "bart":
        plain = AutoModelForSeq2SeqLM.from_pretrained(folder)
        torch.manual_seed(1)
        with torch.no_grad():
            for name, param in plain.named_parameters():
                if name.endswith("bias"):
                    param.copy_(0.3 * torch.randn_like(param))
                elif "attn." in name and param.ndim == 2:  # at the init's 0.02 no cross-attention term reaches 1%
                    param.copy_(0.3 * torch.randn_like(param))
        plain.save_pretrained(folder)
    return folder, load_model(str(folder))


def _recorded(model):
    """``(PairPass, source ids, decoder ids)`` of the pair's trace; the ids checked against the tokenizer's own
    (the source; the target shifted right behind the decoder's start token)."""
    trace = record(model, (SOURCE, TARGET))
    source_ids, decoder_ids = list(trace.tokens("encoder").ids), list(trace.tokens("decoder").ids)
    assert source_ids == model.tokenizer(SOURCE)["input_ids"]
    assert decoder_ids[1:] == model.tokenizer(text_target=TARGET)["input_ids"][:-1]
    assert decoder_ids[0] == model.model.config.decoder_start_token_id
    return pair_pass(trace, model), source_ids, decoder_ids


def _cross_parts(block):
    """(cross-attention module, its value map, its output map, the norm that reads stream + its output)."""
    if hasattr(block, "encoder_attn"):  # BART
        return block.encoder_attn, block.encoder_attn.v_proj, block.encoder_attn.out_proj, block.encoder_attn_layer_norm
    cross = block.layer[1].EncDecAttention  # T5: the feed-forward sub-layer's norm comes next
    return cross, cross.v, cross.o, block.layer[2].layer_norm


def _plain_cross(folder, model):
    """Per decoder layer, from a plainly loaded eager model: the cross-attention output, the encoder-side values,
    the weights the model returns, the output map's weight and bias, and the sum the next norm reads."""
    plain = AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()
    blocks = plain.get_decoder().layers if hasattr(plain.get_decoder(), "layers") else plain.get_decoder().block
    seen: dict[tuple[str, int], torch.Tensor] = {}
    handles = []
    for i, block in enumerate(blocks):
        cross, value, _, norm = _cross_parts(block)
        handles += [cross.register_forward_hook(lambda m, a, o, i=i: seen.__setitem__(("out", i), o[0][0])),
                    value.register_forward_hook(lambda m, a, o, i=i: seen.__setitem__(("v", i), o[0])),
                    norm.register_forward_pre_hook(lambda m, a, i=i: seen.__setitem__(("sum", i), a[0][0]))]
    source = model.tokenizer(SOURCE)["input_ids"]
    labels = torch.tensor([model.tokenizer(text_target=TARGET)["input_ids"]])
    with torch.no_grad():
        out = plain(input_ids=torch.tensor([source]), labels=labels, output_attentions=True)
    for h in handles:
        h.remove()
    return blocks, seen, out


def test_cross_terms_add_up_to_the_cross_attention_output_less_its_bias(tiny_pair):
    folder, model = tiny_pair
    recorded = _recorded(model)[0]
    blocks, seen, _ = _plain_cross(folder, model)
    assert len(recorded.cross_records) == len(blocks)
    for layer, block in enumerate(blocks):
        bias = _cross_parts(block)[2].bias
        expected = seen[("out", layer)] - (0 if bias is None else bias)
        if bias is not None:
            assert bias.abs().max() > 0.1  # a bias left in would show
        terms = cross_terms(recorded.cross_records[layer], recorded.cross_maps[layer][0])
        torch.testing.assert_close(terms.sum(dim=(1, 2)), expected, rtol=1e-4, atol=2e-5)


def test_cross_shares_equal_proximities_by_hand(tiny_pair):
    """By hand in float64: t[i, s, h] = A_h[i, s] · v_h[s] · W_Oʰ from the plain model's values and weights; shares
    of y = the sum the next norm reads, the stream's own part being y − the cross-attention output."""
    folder, model = tiny_pair
    recorded, source_ids, decoder_ids = _recorded(model)
    found = pair_contributions_of(recorded, ["s"] * len(source_ids), ["t"] * len(decoder_ids))
    blocks, seen, out = _plain_cross(folder, model)
    for layer, block in enumerate(blocks):
        _, _, projection, _ = _cross_parts(block)
        weights = out.cross_attentions[layer][0].double()  # [H, T, S]
        heads = weights.shape[0]
        w_o = projection.weight.detach().double().T  # [H·d, D]
        d = w_o.shape[0] // heads
        v = seen[("v", layer)].double()  # [S, H·d]
        terms = torch.stack([weights[h][:, :, None] * (v[:, h * d:(h + 1) * d] @ w_o[h * d:(h + 1) * d])[None]
                             for h in range(heads)], dim=2)  # [T, S, H, D]
        y = seen[("sum", layer)].double()
        stream = y - seen[("out", layer)].double()
        near = (y.abs().sum(-1)[:, None, None] - (y[:, None, None] - terms).abs().sum(-1)).clamp(min=0)
        near_stream = (y.abs().sum(-1) - (y - stream).abs().sum(-1)).clamp(min=0)
        total = near.sum(dim=(1, 2)) + near_stream
        np.testing.assert_allclose(found.cross_attention[layer], (near / total[:, None, None]).numpy(), atol=2e-5)
        np.testing.assert_allclose(found.cross_residual[layer], (near_stream / total).numpy(), atol=2e-5)
    assert (found.cross_attention >= 0).all() and (found.cross_residual >= 0).all()
    np.testing.assert_allclose(found.cross_attention.sum(axis=(2, 3)) + found.cross_residual, 1, atol=1e-5)


# The whole encoder-decoder pass (core.causal.flow_pair): the decoder's three sums and the route across both stacks.

def _decoder_sums(block):
    """(self-attention, its value map, its output map, the norm reading y₁, the norm reading y₂, the norm reading y₃
    or None where y₃ is the block's output, post-norm) of one decoder block of a plainly loaded model."""
    if hasattr(block, "encoder_attn"):  # BART, post-norm: each norm reads stream + update
        return (block.self_attn, block.self_attn.v_proj, block.self_attn.out_proj, block.self_attn_layer_norm,
                block.encoder_attn_layer_norm, block.final_layer_norm, True)
    attention = block.layer[0].SelfAttention  # T5, pre-norm: the next sub-layer's norm reads the stream
    return attention, attention.v, attention.o, block.layer[1].layer_norm, block.layer[2].layer_norm, None, False


def _plain_decoder(folder, model, decoder_ids):
    """Hooked on a plainly loaded eager model, per decoder layer: the block's input x and output, the self- and
    cross-attention outputs, the self-attention's values, y₁, y₂, m₂ and y₃; and the model's output (weights)."""
    plain = AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()
    blocks = plain.get_decoder().layers if hasattr(plain.get_decoder(), "layers") else plain.get_decoder().block
    seen: dict[tuple[str, int], torch.Tensor] = {}

    def keep(name, i):
        return lambda value: seen.__setitem__((name, i), value[0])

    hooks = []
    for i, block in enumerate(blocks):
        attention, value, _, first, second, last, post_norm = _decoder_sums(block)
        hooks += [(block, "pre", keep("x", i)), (block, "post", keep("out", i)), (attention, "post", keep("self", i)),
                  (value, "post", keep("v", i)), (first, "pre", keep("y1", i)), (second, "pre", keep("y2", i)),
                  (_cross_parts(block)[0], "post", keep("cross", i)),
                  (second, "post", keep("m2", i)) if post_norm else (second, "pre", keep("m2", i)),
                  (last, "pre", keep("y3", i)) if post_norm else (block, "post", keep("y3", i))]
    handles = []

    def first_of(x):  # a module's main tensor
        return x[0] if isinstance(x, tuple) else x

    for module, kind, store in hooks:
        if kind == "pre":
            handles.append(module.register_forward_pre_hook(
                lambda m, a, k, store=store: store(first_of(a[0] if a else k["hidden_states"])), with_kwargs=True))
        else:
            handles.append(module.register_forward_hook(lambda m, a, o, store=store: store(first_of(o))))
    source = model.tokenizer(SOURCE)["input_ids"]
    with torch.no_grad():
        out = plain(input_ids=torch.tensor([source]), decoder_input_ids=torch.tensor([decoder_ids]),
                    output_attentions=True)
    for h in handles:
        h.remove()
    return plain, blocks, seen, out


def _by_hand(weights, values, w_o, stream, whole):
    """Shares by hand, float64: terms t[i, j, h] = A_h[i, j] · v_h[j] · W_Oʰ from weights [H, T, K], values [K, H·d],
    the output map's weight [H·d, D]; the proximity of each term and of ``stream`` to ``whole``, normalised."""
    weights, values, w_o, stream, whole = (x.double() for x in (weights, values, w_o, stream, whole))
    heads = weights.shape[0]
    d = w_o.shape[0] // heads
    terms = torch.stack([weights[h][:, :, None] * (values[:, h * d:(h + 1) * d] @ w_o[h * d:(h + 1) * d])[None]
                         for h in range(heads)], dim=2)  # [T, K, H, D]
    size = whole.abs().sum(-1)
    near = (size[:, None, None] - (whole[:, None, None] - terms).abs().sum(-1)).clamp(min=0)
    near_stream = (size - (whole - stream).abs().sum(-1)).clamp(min=0)
    total = near.sum(dim=(1, 2)) + near_stream
    empty = total == 0  # nothing near (T5's start token, <pad>, embeds to zeros): everything to the stream
    total = torch.where(empty, 1.0, total)
    return terms, (near / total[:, None, None]).numpy(), torch.where(empty, 1.0, near_stream / total).numpy()


def test_pair_decoder_terms_and_its_three_sums_against_a_plain_model(tiny_pair):
    """The decoder's self-attention terms Σ_heads Σ_keys and its cross-attention terms Σ_heads Σ_source equal each
    module's output less its bias; the shares of the three sums (y₁ = x + self-attention, y₂ = m₁ + cross-attention,
    y₃ = m₂ + MLP), read off the plain model's norms, equal the proximities by hand; every node's shares ≥ 0, sum 1."""
    folder, model = tiny_pair
    recorded, source_ids, decoder_ids = _recorded(model)
    found = pair_contributions_of(recorded, ["s"] * len(source_ids), ["t"] * len(decoder_ids))
    _, blocks, seen, out = _plain_decoder(folder, model, decoder_ids)
    assert found.num_layers == len(blocks) and found.cross_attention.shape[2] == len(source_ids)
    for layer, block in enumerate(blocks):
        _, _, self_map, *_ = _decoder_sums(block)
        _, _, cross_map, _ = _cross_parts(block)
        for module in (self_map, cross_map):
            if module.bias is not None:
                assert module.bias.abs().max() > 0.1  # a bias left in would show
        y1, y2, m2, y3 = (seen[(n, layer)] for n in ("y1", "y2", "m2", "y3"))
        terms, shares, residual = _by_hand(out.decoder_attentions[layer][0], seen[("v", layer)],
                                           self_map.weight.detach().T, seen[("x", layer)], y1)
        bias = 0 if self_map.bias is None else self_map.bias
        torch.testing.assert_close(terms.sum(dim=(1, 2)).float(), seen[("self", layer)] - bias, rtol=1e-4, atol=2e-5)
        np.testing.assert_allclose(found.attention[layer], shares, atol=2e-5)
        np.testing.assert_allclose(found.attention_residual[layer], residual, atol=2e-5)
        cross_values = recorded.cross_records[layer].values[0].transpose(0, 1).flatten(1)  # [S, H·d], the encoder's
        terms, shares, residual = _by_hand(out.cross_attentions[layer][0], cross_values, cross_map.weight.detach().T,
                                           y2 - seen[("cross", layer)], y2)
        bias = 0 if cross_map.bias is None else cross_map.bias
        torch.testing.assert_close(terms.sum(dim=(1, 2)).float(), seen[("cross", layer)] - bias, rtol=1e-4, atol=2e-5)
        torch.testing.assert_close(recorded.cross_write(layer, 1, 2, 3), terms[1, 2, 3].float(), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(found.cross_attention[layer], shares, atol=2e-5)
        np.testing.assert_allclose(found.cross_residual[layer], residual, atol=2e-5)
        mlp = _proximity(torch.stack([y3 - m2, m2], dim=1), y3).numpy()
        np.testing.assert_allclose(np.stack([found.mlp[layer], found.mlp_residual[layer]], 1), mlp, atol=2e-5)
    for name in ("attention", "attention_residual", "cross_attention", "cross_residual", "mlp", "mlp_residual"):
        assert (getattr(found, name) >= 0).all()
    assert (found.attention.sum(axis=3)[:, np.triu_indices(len(decoder_ids), 1)[0],
                                        np.triu_indices(len(decoder_ids), 1)[1]] == 0).all()  # causal
    np.testing.assert_allclose(found.attention.sum(axis=(2, 3)) + found.attention_residual, 1, atol=1e-5)
    np.testing.assert_allclose(found.cross_attention.sum(axis=(2, 3)) + found.cross_residual, 1, atol=1e-5)
    np.testing.assert_allclose(found.mlp + found.mlp_residual, 1, atol=1e-6)
    encoder = found.encoder
    assert (encoder.attention >= 0).all() and (encoder.mlp >= 0).all()
    np.testing.assert_allclose(encoder.attention.sum(axis=(2, 3)) + encoder.attention_residual, 1, atol=1e-5)
    np.testing.assert_allclose(encoder.mlp + encoder.mlp_residual, 1, atol=1e-6)


def _proximity(parts: torch.Tensor, whole: torch.Tensor) -> torch.Tensor:
    """By hand, float64: max(0, ‖y‖₁ − ‖y − z‖₁) of parts [T, P, D], normalised over P."""
    parts, whole = parts.double(), whole.double()
    near = (whole.abs().sum(-1, keepdim=True) - (whole[:, None] - parts).abs().sum(-1)).clamp(min=0)
    total = near.sum(-1, keepdim=True)
    fallback = torch.zeros_like(near)
    fallback[:, -1] = 1.0  # nothing near: everything to the last part, the stream
    return torch.where(total > 0, near / torch.where(total > 0, total, 1.0), fallback)


def _all_edges(found) -> list[tuple]:
    """Every edge of an encoder-decoder's graph, from the shares alone: (source, target, kind, weight)."""
    edges = []

    def stack(c, prefix, layers, t):
        for layer in range(layers):
            def below(p, layer=layer):
                return (prefix + "block", layer - 1, p) if layer else (prefix + "embedding", -1, p)

            for i in range(t):
                into = (prefix + "attention", layer, i)
                edges.append((below(i), into, "residual", c.attention_residual[layer, i]))
                edges.extend((below(j), into, "attention", c.attention[layer, i, j].sum()) for j in range(t))

    enc = found.encoder
    stack(enc, "encoder_", enc.num_layers, enc.attention.shape[1])
    for layer in range(enc.num_layers):
        for i in range(enc.attention.shape[1]):
            after = ("encoder_attention", layer, i)
            edges += [(after, ("encoder_mlp", layer, i), "mlp", enc.mlp[layer, i]),
                      (("encoder_mlp", layer, i), ("encoder_block", layer, i), "mlp", enc.mlp[layer, i]),
                      (after, ("encoder_block", layer, i), "residual", enc.mlp_residual[layer, i])]
    t, s = found.attention.shape[1], found.cross_attention.shape[2]
    stack(found, "", found.num_layers, t)
    for layer in range(found.num_layers):
        for i in range(t):
            cross = ("cross", layer, i)
            edges.append((("attention", layer, i), cross, "residual", found.cross_residual[layer, i]))
            edges += [(("encoder_block", enc.num_layers - 1, k), cross, "cross", found.cross_attention[layer, i, k].sum())
                      for k in range(s)]
            edges += [(cross, ("mlp", layer, i), "mlp", found.mlp[layer, i]),
                      (("mlp", layer, i), ("block", layer, i), "mlp", found.mlp[layer, i]),
                      (cross, ("block", layer, i), "residual", found.mlp_residual[layer, i])]
    return edges


@pytest.mark.parametrize("threshold", [0.01, 0.04, 0.2])
def test_pair_route_keeps_exactly_the_edges_above_the_threshold_reachable_from_the_chosen_node(tiny_pair, threshold):
    _, model = tiny_pair
    found = pair_contributions(model, SOURCE, TARGET)
    heavy = [e for e in _all_edges(found) if e[3] > threshold]
    into: dict = {}
    for edge in heavy:
        into.setdefault(edge[1], []).append(edge)
    crossing = 0  # routes that cross into the encoder and reach the source tokens
    for position in range(found.num_positions):
        reached, frontier, kept = set(), [("block", found.num_layers - 1, position)], set()
        while frontier:  # breadth first, from the chosen node down
            node = frontier.pop(0)
            if node in reached:
                continue
            reached.add(node)
            for source, target, kind, weight in into.get(node, []):
                kept.add((source, target, kind, round(float(weight), 5)))
                frontier.append(source)
        graph = route_graph(found, position, threshold)
        assert {(e.source, e.target, e.kind, round(e.weight, 5)) for e in graph.edges} == kept
        crossing += any(e.kind == "cross" for e in graph.edges) and any(e.source[0] == "encoder_embedding"
                                                                        for e in graph.edges)
        for edge in graph.edges:
            if edge.kind == "cross":
                assert sum(edge.heads) == pytest.approx(edge.weight, abs=1e-5)
    assert crossing > 0 or threshold > 0.04


def test_pair_logit_lens_of_the_last_residual_is_the_models_logits(tiny_pair):
    """Through the decoder's final norm (T5's; BART has none) and the unembedding: the last residual's lens, and its
    write read through the norm frozen there, equal the plain model's logits (BART's less its final_logits_bias)."""
    folder, model = tiny_pair
    recorded, source_ids, decoder_ids = _recorded(model)
    plain = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    with torch.no_grad():
        logits = plain(input_ids=torch.tensor([source_ids]), decoder_input_ids=torch.tensor([decoder_ids])).logits[0]
    logits = logits - getattr(plain, "final_logits_bias", torch.zeros(1))[0]
    for position in range(1, len(decoder_ids)):
        last = recorded.decoder.residual_post[-1, position]
        np.testing.assert_allclose(decoder_logits(recorded, last, position, lens=True), logits[position].numpy(),
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(decoder_logits(recorded, last, position), logits[position].numpy(),
                                   rtol=1e-3, atol=1e-5)


def plain_mlps(folder, source_ids, decoder_ids) -> dict:
    """Per (stack, layer), from hooks on a plainly loaded eager model: the MLP's output map (BART's fc2, T5's
    DenseReluDense.wo), its input (the neurons, [T, F]) and what it returned (the MLP's output, [T, D])."""
    plain = AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()
    seen, handles = {}, []
    for stack, module in (("encoder", plain.get_encoder()), ("decoder", plain.get_decoder())):
        for i, block in enumerate(module.layers if hasattr(module, "layers") else module.block):
            out_map = block.fc2 if hasattr(block, "fc2") else block.layer[-1].DenseReluDense.wo
            seen[(stack, i)] = {"map": out_map}
            handles += [out_map.register_forward_pre_hook(lambda m, a, k=(stack, i): seen[k].__setitem__("in", a[0][0])),
                        out_map.register_forward_hook(lambda m, a, o, k=(stack, i): seen[k].__setitem__("out", o[0]))]
    with torch.no_grad():
        plain(input_ids=torch.tensor([source_ids]), decoder_input_ids=torch.tensor([decoder_ids]))
    for h in handles:
        h.remove()
    return seen


def test_pair_mlp_neurons_add_up_to_the_mlp_output_and_their_shares_to_1(tiny_pair):
    """Each MLP of both stacks: the neuron terms plus the output map's bias equal the MLP's output hooked on a plain
    model; each term is the hooked activation times the map's row; the shares (all F neurons) equal the proximities
    by hand in float64, are ≥ 0 and sum to 1, and the top neurons are those of largest share."""
    folder, model = tiny_pair
    recorded, source_ids, decoder_ids = _recorded(model)
    plain = plain_mlps(folder, source_ids, decoder_ids)
    assert {stack for stack, _ in plain} == {"encoder", "decoder"}
    ranked = 0
    for (stack, layer), seen in plain.items():
        found = getattr(recorded, stack)
        rows = seen["map"].weight.detach().double().T  # [F, D]
        bias = seen["map"].bias
        if bias is not None:
            assert bias.abs().max() > 0.1  # a bias left in or lost would show
        for position in range(seen["out"].shape[0]):
            terms, found_bias = neuron_terms(model, found, layer, position, output_map=found.mlp_outputs[layer])
            torch.testing.assert_close(terms.sum(0) + found_bias, seen["out"][position], rtol=1e-4, atol=1e-5)
            by_hand = seen["in"][position].double()[:, None] * rows
            torch.testing.assert_close(terms.double(), by_hand, rtol=1e-4, atol=1e-6)
            y = seen["out"][position].double().numpy()
            near = np.maximum(0, np.abs(y).sum() - np.abs(y[None] - by_hand.numpy()).sum(-1))
            if near.sum() == 0:  # nothing near the output (T5's start token embeds to zeros): no share to give
                continue
            top = pair_top_neurons(model, recorded, stack, layer, position, k=rows.shape[0])
            ranked += 1
            assert top.count == rows.shape[0] and (top.share >= 0).all()
            assert top.share.sum() == pytest.approx(1, abs=1e-5)
            np.testing.assert_allclose(top.share, (near / near.sum())[top.index], rtol=2e-4, atol=2e-5)  # float32 L1 sums
            assert all(np.diff(top.share) <= 0)  # largest first
            # the trace's pass runs sdpa, the plain model eager: float32 rounding apart (3.5e-7 seen on T5)
            np.testing.assert_allclose(top.activation, seen["in"][position, top.index].numpy(), rtol=1e-5, atol=1e-6)
    assert ranked >= len(plain) * (len(decoder_ids) - 1)  # at most the start token skipped


def test_pair_neurons_are_refused_where_the_maps_output_is_not_what_the_stream_received(tiny_pair):
    """pair_pass keeps an MLP's output map only where what it returned equals y₃ − m₂ (the decoder's sums); a map
    whose output the stream did not receive gives a sentence instead of a table."""
    _, model = tiny_pair
    recorded = _recorded(model)[0]
    decoder = recorded.decoder
    calls = [BlockCalls([]) for _ in decoder.mlp_outputs]
    for layer, seen in enumerate(calls):
        seen.mlp_map, seen.neurons, seen.written = (decoder.mlp_outputs[layer], decoder.mlp_activations[layer],
                                                    decoder.mlp_added[layer])
    assert all(m is not None for m in with_neurons(decoder, calls, recorded.mlp_sum, recorded.cross_mid).mlp_outputs)
    calls[1].written = calls[1].written + 0.01 * calls[1].written.abs().max()  # 1% off: not the stream's update
    off = with_neurons(decoder, calls, recorded.mlp_sum, recorded.cross_mid)
    assert off.mlp_outputs[0] is decoder.mlp_outputs[0] and off.mlp_outputs[1] is None
    with pytest.raises(UnsupportedArchitecture, match="cannot find the output map of the decoder's MLPs"):
        pair_top_neurons(model, dataclasses.replace(recorded, decoder=off), "decoder", 1, 1)
