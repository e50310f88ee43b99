"""The details of one edge or node of an information-flow route (``core.causal.flow``), and the route read as sentences.

- ``head_write``: what one head wrote into one query's residual stream from one key position, ``t[i, j, h]``
  ``[D]`` (the term whose share is the edge's weight).
- ``neuron_terms`` / ``top_neurons``: block ``l``'s MLP output at one position as one term per neuron,
  ``a[n] · W_out[n]`` ``[F, D]``, plus the output map's bias ``[D]``; their sum is the MLP's output. A neuron's
  *share* is the graph's proximity measure against that output ``y``, ``max(0, ‖y‖₁ − ‖y − a[n] · W_out[n]‖₁)``,
  normalised over the neurons (the bias is not a part, as for the heads). The output map is ``core.model.parts``' for
  a one-stack model; an encoder-decoder's pass hands its own (``core.causal.flow_pair.pair_top_neurons``).
- ``route_summary``: which earlier tokens carry the route into a position (summed weight of the graph's attention
  edges between positions), through which layers, and which heads carry the largest of those edges; two candidates
  within ``ROUTE_MARGIN`` of each other are not ranked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.causal.flow import RouteGraph, carriers, head_terms
from core.causal.flow_stack import stack_of
from core.model.attention_layers import SINGLE_STACK
from core.model.models import LoadedModel
from core.model.parts import parts_of
from core.model.recording import UnsupportedArchitecture
from core.model.tokens import decoded_tokens, readable_token

# Two summed shares (or two heads' shares of an edge) closer than this are called about equal: the sentence does not
# rank candidates that one step of the threshold slider (0.01) could reorder.
ROUTE_MARGIN = 0.02
TOP_HEADS = 3


def head_write(source, layer: int, query: int, key: int, head: int) -> torch.Tensor:
    """``[D]``: what ``head`` of block ``layer`` wrote into ``query``'s residual stream from position ``key``:
    attention weight × the key's value × the head's slice of the output projection (through the frozen scale of a
    norm on the attention output, where the block has one). ``source``: a ``Trace`` or a ``core.causal.flow_stack``
    stack."""
    return head_terms(source, layer, slice(query, query + 1))[0, key, head]


def mlp_output_map(model: LoadedModel, layer: int, module: torch.nn.Module | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(W_out [F, D], b [D])`` of block ``layer``'s MLP output map (``down_proj``, ``c_proj``, ``fc2``, T5's ``wo`` …;
    ``nn.Linear`` or GPT-2's ``Conv1D``), read as an affine map: its value at 0 is ``b``, at each unit vector ``b``
    plus a row. ``module``: that map where the caller found it (an encoder-decoder's stacks); None: the one
    ``core.model.parts`` found for block ``layer`` of a one-stack model."""
    if module is None:
        layers = parts_of(model.model).stacks.get(SINGLE_STACK, ())
        module = layers[layer].mlp_output if layer < len(layers) else None
    if module is None:
        raise UnsupportedArchitecture(f"The app cannot find the MLP's output map in {model.name}'s blocks.")
    weight = module.weight.detach()
    with torch.inference_mode():
        inner = weight.shape[1] if isinstance(module, torch.nn.Linear) else weight.shape[0]
        zero = module(torch.zeros(1, inner, dtype=weight.dtype)).float()[0]
        if isinstance(module, torch.nn.Linear):  # y = x Wᵀ + b
            return weight.float().T, zero
        return module(torch.eye(inner, dtype=weight.dtype)).float() - zero, zero


def neuron_terms(model: LoadedModel, source, layer: int, position: int, *,
                 output_map: torch.nn.Module | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(terms [F, D], bias [D])``: each neuron's activation times its output row at ``position``; ``terms.sum(0) +
    bias`` is block ``layer``'s MLP output there, which the stream receives (``mlp_update``). Where the block
    normalises the MLP's output before adding it (Gemma 2/3), terms and bias go through that norm with its scale
    frozen at this position, so they add up to the update. ``source``: a ``Trace`` (its block computed again) or an
    encoder-decoder stack's pass (``core.causal.flow_pair.pair_pass``) with its ``output_map``."""
    block = stack_of(source).block(layer)
    if block.mlp_activations is None:
        raise UnsupportedArchitecture("The MLP's neurons were not recorded for this model.")
    weight, bias = mlp_output_map(model, layer, output_map)
    terms = block.mlp_activations[position][:, None] * weight
    output, update = terms.sum(0) + bias, block.mlp_update[position]
    if not torch.allclose(output, update, rtol=1e-4, atol=1e-5 * float(update.abs().max())):
        safe = torch.where(output != 0, output, torch.ones_like(output))
        factor = torch.where(output != 0, update / safe, 0.0)  # a norm on the MLP output, its scale frozen here
        terms, bias = terms * factor, bias * factor
    return terms, bias


@dataclass(frozen=True)
class Neurons:
    """The MLP's ``k`` neurons of largest share at one position: ``index`` [k], ``activation`` [k], ``share`` [k]
    (of the neurons' proximities, summing to 1 over all ``F`` neurons), ``terms`` [k, D]."""

    index: np.ndarray
    activation: np.ndarray
    share: np.ndarray
    terms: torch.Tensor
    count: int  # F: the MLP's neurons


def top_neurons(model: LoadedModel, source, layer: int, position: int, k: int = 8, *,
                output_map: torch.nn.Module | None = None) -> Neurons:
    """The ``k`` neurons of block ``layer``'s MLP whose terms bring its output at ``position`` closest (the proximity
    measure of the route graph, normalised over the neurons); ``output_map`` as in ``neuron_terms``."""
    terms, bias = neuron_terms(model, source, layer, position, output_map=output_map)
    output = terms.sum(0) + bias
    with torch.inference_mode():
        near = (output.abs().sum() - (output[None] - terms).abs().sum(-1)).clamp(min=0)
        total = float(near.sum())
        share = (near / total if total > 0 else torch.zeros_like(near)).numpy()
    order = np.argsort(-share, kind="stable")[:k]
    activation = stack_of(source).block(layer).mlp_activations[position].numpy()
    return Neurons(order, activation[order], share[order], terms[torch.from_numpy(order)], len(share))


def decode(lm, ids: np.ndarray) -> list[str]:
    """Each token id of ``ids`` ``[k]`` as its label, by the app's one rule (as ``core.causal.unembedding.top_tokens``
    writes them)."""
    return [readable_token(t) for t in decoded_tokens(lm.tokenizer, [int(i) for i in ids])]


@dataclass(frozen=True)
class HeadEdge:
    """One head's share of one attention edge of the route (``layer``, ``head``, from ``key`` into ``query``)."""

    layer: int
    head: int
    key: int
    query: int
    share: float


@dataclass(frozen=True)
class RouteSummary:
    """The route into ``position`` read off its graph: ``carriers`` ``[(position, summed weight, layers, edges)]``
    of the attention edges from one position into another, heaviest first; ``tied`` how many of them (the first
    included) lie within ``ROUTE_MARGIN`` of the first; ``heads`` the ``TOP_HEADS`` largest single (head, edge)
    shares on those edges, one per head, largest first."""

    position: int
    carriers: list[tuple[int, float, list[int], int]]
    tied: int
    heads: list[HeadEdge]


def route_summary(graph: RouteGraph, margin: float = ROUTE_MARGIN) -> RouteSummary:
    """``RouteSummary`` of ``graph`` (see there)."""
    moving = [e for e in graph.edges if e.kind == "attention" and e.source[2] != e.target[2]]
    found = [(p, total, layers, sum(1 for e in moving if e.source[2] == p))
             for p, (total, layers) in carriers(graph).items()]
    tied = sum(1 for carrier in found if carrier[1] >= found[0][1] - margin)
    best: dict[tuple[int, int], HeadEdge] = {}
    for edge in moving:
        layer = edge.target[1]
        for head, share in enumerate(edge.heads):
            if share > best.get((layer, head), HeadEdge(layer, head, 0, 0, -1.0)).share:
                best[(layer, head)] = HeadEdge(layer, head, edge.source[2], edge.target[2], float(share))
    heads = sorted(best.values(), key=lambda h: (-h.share, h.layer, h.head))[:TOP_HEADS]
    return RouteSummary(graph.position, found, tied, heads)
