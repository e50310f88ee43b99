"""Information flow through an encoder-decoder (issue 39, item 4): the encoder's graph over the source, the decoder's
over the target, joined by the cross-attention edges from each decoder position to the encoder's last-layer nodes.

The pair's one trace (``core.model.trace.record(model, (source, target))``, the pass ``core.model.seq2seq.analyze_pair``
reads: the target shifted right behind the decoder's start token), each block called again alone (``pair_pass``,
``core.causal.flow_pair_blocks``); no pass of its own.
The encoder's nodes are ``core.causal.flow``'s (self-attention, MLP). A decoder block has three sub-blocks,
so at each decoder position ``i`` of layer ``l`` the stream passes through three sums, and each node's incoming shares
are the proximities of ``core.causal.flow`` (``max(0, ‖y‖₁ − ‖y − z‖₁)``, normalised to add up to 1) of the parts of one sum:

1. self-attention, ``y₁ = x + Σ_h Σ_{j≤i} t[i, j, h] (+ bias)``: ``x`` the block's input, ``t`` one term per (head,
   earlier target position) → ``attention``, ``attention_residual``;
2. cross-attention, ``y₂ = m₁ + Σ_h Σ_s c[i, s, h] (+ bias)``: ``m₁`` the stream after sum 1 (its norm's output in a
   post-norm block such as BART's, ``y₁`` itself in a pre-norm block such as T5's), ``c`` one term per (head, source
   position) of the encoder's output (``core.causal.flow_pair_blocks.cross_terms``) → ``cross_attention``, ``cross_residual``;
3. the MLP, ``y₃ = m₂ + mlp(m₂)``: ``m₂`` the stream after sum 2 → ``mlp``, ``mlp_residual``.

Each ``y`` is the input of the first norm the block calls after that sub-block (post-norm: the norm that follows the
update; pre-norm: the next sub-block's norm, and the block's output for ``y₃``), found from the calls, not by family.
Output biases are not parts (as in ``core.causal.flow``). An MLP node's neurons (``pair_top_neurons``, as
``core.causal.flow_details.top_neurons``): the output map is ``core.model.parts``' (BART's ``fc2``) or, where the parts
hold none (T5's blocks there are its sub-layers), the last linear map to the hidden size in the block
(``DenseReluDense.wo``); it is kept only where what it returned is what the stream received (``y₃ − m₂``).

Shapes (``L`` decoder layers, ``T`` decoder positions, ``S`` source tokens, ``H`` heads)::

    PairContributions.encoder           core.causal.flow.Contributions of the encoder over the source
    PairContributions.attention         [L, T, T, H]   decoder self-attention (causal: 0 for later keys)
    PairContributions.attention_residual [L, T]
    PairContributions.cross_attention   [L, T, S, H]   into the stream after cross-attention
    PairContributions.cross_residual    [L, T]
    PairContributions.mlp, .mlp_residual [L, T]

The graph (``core.causal.flow.route_graph(pair_contributions, position, threshold)``) has the decoder's nodes ``("embedding",
-1, i)``, ``("attention", l, i)``, ``("cross", l, i)`` (the stream after cross-attention), ``("mlp", l, i)``, ``("block",
l, i)``, the encoder's the same kinds prefixed ``encoder_``; a cross edge (kind "cross") runs from ``("encoder_block",
L_enc − 1, s)`` into ``("cross", l, i)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import NamedTuple

import numpy as np
import torch

from core.causal.flow import (
    Contributions,
    Edge,
    Node,
    RouteGraph,
    attention_shares,
    contributions_of,
    layer_runs,
    proximity_shares,
    record_output_map,
    stack_incoming,
)
from core.causal.flow_details import ROUTE_MARGIN, Neurons, top_neurons
from core.causal.flow_pair_blocks import BlockCalls, StackBlocks, cross_shares, cross_terms
from core.causal.flow_stack import RecordedPass
from core.causal.logit_attribution import frozen_norm
from core.model.models import LoadedModel, threads_for_input
from core.model.parts import parts_of
from core.model.recording import UnsupportedArchitecture
from core.model.trace import Trace, record

ENCODER = "encoder_"  # the prefix of the encoder's node kinds


@dataclass(frozen=True, eq=False)
class KeptWeightsPass(RecordedPass):
    """A ``RecordedPass`` whose records keep the weights the model used: T5's relative-position bias is added to
    the scores, so the weights cannot be recomputed from queries and keys alone. Its MLPs: ``mlp_outputs[l]`` the
    output map (the module whose input is ``mlp_activations[l]``; None where its output is not what the stream
    received) and ``mlp_added`` [L, T, D] what those maps returned, the MLP's update (the decoder's, y₃ − m₂)."""

    mlp_outputs: tuple[torch.nn.Module | None, ...] = field(default=(), repr=False)
    mlp_added: torch.Tensor | None = field(default=None, repr=False)

    @property
    def mlp_update(self) -> torch.Tensor:
        return super().mlp_update if self.mlp_added is None else self.mlp_added

    def attention(self, layer: int, heads: list[int] | None = None) -> np.ndarray:
        weights = self.records[layer].weights[0].float().numpy()
        return weights if heads is None else weights[list(heads)]


@dataclass(frozen=True, eq=False)
class PairPass:
    """One encoder-decoder pass: ``encoder`` and ``decoder`` (its self-attention; ``residual_mid`` = ``m₁``) as
    ``RecordedPass``; per decoder layer ``cross_records``, ``cross_maps`` (W [H·d, D], b [D]), ``cross_output`` what
    the module returned [L, T, D], ``cross_sum`` ``y₂``
    [L, T, D], ``cross_mid`` ``m₂`` [L, T, D], ``mlp_sum`` ``y₃`` [L, T, D]; ``final_norm`` the decoder's (or None),
    ``unembedding_input`` [T, D] what the language-model head read (None without one)."""

    encoder: RecordedPass
    decoder: RecordedPass
    cross_records: dict
    cross_maps: tuple
    cross_output: torch.Tensor
    cross_sum: torch.Tensor
    cross_mid: torch.Tensor
    mlp_sum: torch.Tensor
    final_norm: torch.nn.Module | None
    unembedding: torch.nn.Module | None
    unembedding_input: torch.Tensor | None

    def cross_write(self, layer: int, query: int, source: int, head: int) -> torch.Tensor:
        """``[D]``: what ``head`` of decoder layer ``layer``'s cross-attention wrote at ``query`` from source ``source``."""
        return cross_terms(self.cross_records[layer], self.cross_maps[layer][0])[query, source, head]


@dataclass(frozen=True, eq=False)
class PairContributions:
    """Each node's incoming contributions through an encoder-decoder (shapes in the module docstring)."""

    encoder: Contributions
    attention: np.ndarray
    attention_residual: np.ndarray
    cross_attention: np.ndarray
    cross_residual: np.ndarray
    mlp: np.ndarray
    mlp_residual: np.ndarray
    tokens: list[str]

    num_layers = property(lambda self: self.attention.shape[0])
    num_positions = property(lambda self: self.attention.shape[1])

    @cached_property
    def key_shares(self) -> np.ndarray:
        """``[L, T, T]``: the decoder's self-attention shares summed over the heads."""
        return self.attention.sum(axis=3)

    @cached_property
    def source_shares(self) -> np.ndarray:
        """``[L, T, S]``: each source position's cross-attention share summed over the heads."""
        return self.cross_attention.sum(axis=3)

    def last(self, position: int) -> Node:
        return ("block", self.num_layers - 1, position)

    def incoming(self, node: Node, threshold: float) -> list[Edge]:
        """The edges into ``node`` (cross edges only above ``threshold``, summed over heads)."""
        kind, layer, p = node
        if kind.startswith(ENCODER):
            return stack_incoming(self.encoder, node, threshold, ENCODER)
        if kind == "block":
            return [Edge(("mlp", layer, p), node, float(self.mlp[layer, p]), "mlp"),
                    Edge(("cross", layer, p), node, float(self.mlp_residual[layer, p]), "residual")]
        if kind == "mlp":
            return [Edge(("cross", layer, p), node, float(self.mlp[layer, p]), "mlp")]
        if kind == "cross":
            edges = [Edge(("attention", layer, p), node, float(self.cross_residual[layer, p]), "residual")]
            top = (ENCODER + "block", self.encoder.num_layers - 1)
            summed, shares = self.source_shares[layer, p], self.cross_attention[layer, p]
            for s in np.flatnonzero(summed > threshold):
                edges.append(Edge((*top, int(s)), node, float(summed[s]), "cross", tuple(shares[s].tolist())))
            return edges
        return stack_incoming(self, node, threshold)  # the decoder's self-attention node: as in one stack


def pair_pass(trace: Trace | None, model: LoadedModel) -> PairPass:
    """What ``pair_contributions_of`` needs, read from the pair's trace (``core.model.trace.record(model, (source,
    target))``: each block called again alone, ``core.causal.flow_pair_blocks``; no pass). Raises
    ``UnsupportedArchitecture`` (a sentence), also for no trace (``PairAnalysis.trace`` of a model the app does not
    record)."""
    if trace is None:
        raise UnsupportedArchitecture(f"the app does not record {model.name}'s attention, so it has no trace to read")
    if trace.stack_names != ("encoder", "decoder", "cross"):
        raise UnsupportedArchitecture(f"{model.name} has no cross-attention the app can record.")
    base = model.model
    parts = parts_of(base)  # the decoder's final norm (T5's final_layer_norm; BART: None) and the unembedding
    blocks = {stack: StackBlocks(trace, stack) for stack in ("encoder", "decoder")}
    passes = {stack: _stack_pass(trace, found) for stack, found in blocks.items()}
    decoder, post_norm = blocks["decoder"], blocks["decoder"].post_norm()
    cross_records = {layer: decoder.record("cross", layer) for layer in range(len(decoder.layers))}
    cross_mid = decoder.stacked(lambda found: found.residual_mid["cross"])
    cross_sum = decoder.stacked(lambda found: found.attention_sum["cross"] if post_norm else found.residual_mid["cross"])
    mlp_sum = decoder.stacked(lambda found: found.mlp_sum) if post_norm else torch.tensor(trace.residual["decoder"][1:])
    encoder = passes["encoder"]
    whole = encoder.residual_post if encoder.mlp_sum is None else encoder.mlp_sum  # y₃ of an encoder block
    encoder = with_neurons(encoder, blocks["encoder"].mlp_calls(base), whole, encoder.residual_mid)
    head_input = trace.outputs.get("unembedding_input")
    return PairPass(encoder, with_neurons(passes["decoder"], decoder.mlp_calls(base), mlp_sum, cross_mid), cross_records,
                    tuple(record_output_map(cross_records[layer]) for layer in range(len(cross_records))),
                    decoder.stacked(lambda found: found.attention_output["cross"]), cross_sum, cross_mid, mlp_sum,
                    parts.final_norm, parts.unembedding, _tensor_of(head_input))


def _tensor_of(array: np.ndarray | None) -> torch.Tensor | None:
    return None if array is None else torch.tensor(array)


def _stack_pass(trace: Trace, blocks: StackBlocks) -> KeptWeightsPass:
    """One stack's self-attention sub-blocks as a ``RecordedPass`` (its MLP's node: ``PairPass`` for the decoder)."""
    stack, post_norm = blocks.stack, blocks.post_norm()
    if any(found.residual_mid[stack] is None for found in blocks.layers):
        raise UnsupportedArchitecture(f"The app cannot find the stream after each attention of the {stack}.")
    residual = torch.tensor(trace.residual[stack])
    return KeptWeightsPass(
        input_ids=trace.tokens(stack).ids, records={layer: blocks.record(stack, layer) for layer in range(len(blocks.layers))},
        residual_pre=residual[:-1], residual_mid=blocks.stacked(lambda found: found.residual_mid[stack]),
        residual_post=residual[1:], attention_output=blocks.stacked(lambda found: found.attention_output[stack]),
        attention_sum=blocks.stacked(lambda found: found.attention_sum[stack]) if post_norm else None,
        mlp_sum=blocks.stacked(lambda found: found.mlp_sum) if post_norm and stack == "encoder" else None)


def with_neurons(recorded: KeptWeightsPass, seen: list[BlockCalls], whole: torch.Tensor, stream: torch.Tensor) -> KeptWeightsPass:
    """``recorded`` with its MLPs' output maps (``seen[l].mlp_map`` where what it returned is what the stream received,
    ``whole[l] − stream[l]`` [T, D] up to the rounding of ``whole``), their neurons and outputs when every layer has one."""
    maps = tuple(c.mlp_map if c.written is not None and torch.allclose(
        c.written.float(), y - m, rtol=1e-4, atol=1e-5 * float(y.abs().max())) else None
        for c, y, m in zip(seen, whole, stream, strict=True))
    if any(m is None for m in maps):
        return replace(recorded, mlp_outputs=maps)
    return replace(recorded, mlp_outputs=maps, mlp_activations=torch.stack([c.neurons.float() for c in seen]),
                   mlp_added=torch.stack([c.written.float() for c in seen]))


def pair_top_neurons(model: LoadedModel, recorded: PairPass, stack: str, layer: int, position: int,
                     k: int = 8) -> Neurons:
    """``core.causal.flow_details.top_neurons`` of the MLP of layer ``layer`` of ``stack`` ("encoder" or "decoder") at
    ``position``, through the output map ``pair_pass`` found and checked. Raises ``UnsupportedArchitecture`` (a
    sentence) where it found none."""
    found = recorded.encoder if stack == "encoder" else recorded.decoder
    output_map = found.mlp_outputs[layer] if layer < len(found.mlp_outputs) else None
    if output_map is None or found.mlp_activations is None:
        raise UnsupportedArchitecture(f"The app cannot find the output map of the {stack}'s MLPs (the linear map whose "
                                      "output the residual stream receives), so their neurons are not listed.")
    return top_neurons(model, found, layer, position, k, output_map=output_map)


def pair_contributions_of(recorded: PairPass, source_tokens: list[str], target_tokens: list[str],
                          progress: Callable[[int, int], None] | None = None) -> PairContributions:
    """``PairContributions`` of one recorded pass; ``progress(done, total)`` after each layer of either stack."""
    decoder = recorded.decoder
    layers, t = decoder.num_layers, decoder.num_tokens
    total = recorded.encoder.num_layers + layers
    encoder = contributions_of(recorded.encoder, source_tokens,
                               None if progress is None else lambda done, _: progress(done, total))
    s, heads = recorded.encoder.num_tokens, decoder.records[0].queries.shape[1]
    attention, cross = np.zeros((layers, t, t, heads), np.float32), np.zeros((layers, t, s, heads), np.float32)
    attention_residual, cross_residual, mlp, mlp_residual = (np.zeros((layers, t), np.float32) for _ in range(4))
    with threads_for_input(0):  # one torch thread, as core.causal.flow.contributions_of
        for layer in range(layers):
            attention[layer], attention_residual[layer] = attention_shares(decoder, layer)
            whole = recorded.cross_sum[layer]
            stream = whole - recorded.cross_output[layer]  # m₁: y₂ less the cross-attention's output (bias included)
            cross[layer], cross_residual[layer] = cross_shares(
                cross_terms(recorded.cross_records[layer], recorded.cross_maps[layer][0]), stream, whole)
            mid, whole = recorded.cross_mid[layer], recorded.mlp_sum[layer]
            shares = proximity_shares(torch.stack([whole - mid, mid], dim=1), whole).numpy()
            mlp[layer], mlp_residual[layer] = shares[:, 0], shares[:, 1]
            if progress is not None:
                progress(recorded.encoder.num_layers + layer + 1, total)
    return PairContributions(encoder, attention, attention_residual, cross, cross_residual, mlp, mlp_residual,
                             list(target_tokens))


def pair_contributions(model: LoadedModel, source: str, target: str, *, max_tokens: int | None = None,
                       progress: Callable[[int, int], None] | None = None) -> PairContributions:
    """Record the pair's trace (one teacher-forced pass of an encoder-decoder over ``source`` and ``target``) and return
    every node's incoming contributions. Raises ``UnsupportedArchitecture`` (a sentence) for a model the app cannot
    take apart."""
    trace = record(model, (source, target), max_tokens=max_tokens)
    return pair_contributions_of(pair_pass(trace, model), list(trace.tokens("encoder").tokens),
                                 list(trace.tokens("decoder").tokens), progress)


def decoder_logits(recorded: PairPass, vector: torch.Tensor, position: int, *, lens: bool = False) -> np.ndarray | None:
    """``[V]``, or None for a model without a language-model head. ``lens=False``: what ``vector`` (a write into
    decoder position ``position``'s stream; or ``k`` of them ``[k, D]``, giving ``[k, V]``) adds to each logit there,
    through the decoder's final norm with its scale frozen at that position's last residual and the unembedding (the
    norm's shift and the biases are no part, as in ``core.causal.unembedding.written_logits``); ``lens=True``: the logit lens
    of a residual ``vector``: the norm, then the unembedding. A constant factor between the norm's output and what the
    head reads (T5 scales it by d^-½ when the head is tied to the embedding) is measured from this pass and kept."""
    if recorded.unembedding is None or recorded.unembedding_input is None:
        return None
    norm, last = recorded.final_norm, recorded.decoder.residual_post[-1, position]
    with torch.inference_mode():
        normed_last = norm(last[None])[0].float() if norm is not None else last
        read = recorded.unembedding_input[position]
        factor = float(read @ normed_last / (normed_last @ normed_last).clamp(min=1e-30))
        if not torch.allclose(read, factor * normed_last, rtol=1e-3, atol=1e-4 * float(read.abs().max())):
            raise UnsupportedArchitecture("The language-model head does not read the decoder's final norm's output.")
        if lens:
            mapped = norm(vector.float()[None])[0] if norm is not None else vector.float()
        else:
            mapped = frozen_norm(norm, last)[0](vector.double()).float() if norm is not None else vector.float()
        return (factor * mapped @ recorded.unembedding.weight.detach().float().T).numpy()


def pair_route_sentence(graph: RouteGraph, source_labels: list[str], target_labels: list[str],
                        margin: float = ROUTE_MARGIN) -> str:
    """Plain text (escape it for markdown): which source tokens the route into the chosen decoder position reads
    through its cross-attention edges (summed weight per source token, two within ``margin`` not ranked), and which
    earlier target token its decoder self-attention edges bring most from."""
    chosen = f"“{target_labels[graph.position]}” (decoder position {graph.position})"
    sent: dict[int, list] = {}
    for edge in graph.edges:
        if edge.kind == "cross":
            total = sent.setdefault(edge.source[2], [0.0, set()])
            total[0] += edge.weight
            total[1].add(edge.target[1])
    if not sent:
        sentence = (f"At this threshold no cross-attention edge joins the route into {chosen}: every edge kept stays "
                    "in the decoder.")
    else:
        ranked = sorted(sent.items(), key=lambda item: -item[1][0])
        top, (weight, layers) = ranked[0]
        tied = [(s, w) for s, (w, _) in ranked[1:] if w >= weight - margin]
        named = f"“{source_labels[top]}” (source token {top})"
        sentence = (f"Through cross-attention the route into {chosen} reads the source most from {named}: its edges in "
                    f"decoder {layer_runs(sorted(layers))} add up to {weight:.2f}")
        if tied:
            sentence += ", about as much as " + ", ".join(f"“{source_labels[s]}” (source token {s}, {w:.2f})"
                                                        for s, w in tied)
        sentence += f"; {len(sent)} source token{'s' if len(sent) != 1 else ''} in all send cross edges."
    moving: dict[int, float] = {}
    for edge in graph.edges:
        if edge.kind == "attention" and not edge.source[0].startswith(ENCODER) and edge.source[2] != edge.target[2]:
            moving[edge.source[2]] = moving.get(edge.source[2], 0.0) + edge.weight
    if moving:
        earlier, weight = max(moving.items(), key=lambda item: item[1])
        sentence += (f" Within the decoder, the self-attention edges from “{target_labels[earlier]}” (decoder position "
                     f"{earlier}) weigh most, {weight:.2f} in all.")
    return sentence


class PairFlow(NamedTuple):
    """An encoder-decoder's recorded pass (``PairPass``) and its contributions."""

    recorded: PairPass
    contributions: PairContributions
