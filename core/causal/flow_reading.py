"""The information-flow route read as sentences (``core.causal.flow``), with the numbers they need beyond the shares.

- ``Measures``: how much attention weight each position receives (``received``: the mean weight the queries that may
  read it give it, over every head of every layer), and which nodes have no measurable share (``unmeasured_*``:
  every part's proximity ``max(0, ‖y‖₁ − ‖y − part‖₁)`` is 0, where the shares fall to the residual by convention).
- ``route_sentence``: which earlier token carries most of the route into the chosen token; a sum of shares of
  different nodes is said to be one (it can pass 1), and a carrier that is an attention sink (``SINK_WEIGHT``) is
  named as one.
- ``node_sentence``: a node's incoming shares in a sentence (or that none can be measured there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from core.causal.flow import Contributions, Node, RouteGraph, carriers, layer_runs
from core.causal.flow_stack import TraceStack, stack_of
from core.maths.numbers import percent

# A position whose mean received weight (over every head of every layer, from the queries that may read it) is at
# least this is called an attention sink: the per-head threshold of Gu et al. (2024, "When attention sink emerges"),
# here met on average by all heads. On the bundled models' first token: SmolLM2 0.60, Gemma 3 0.52, MiniLM 0.40;
# the other tokens of a 20-token sentence about 0.03.
SINK_WEIGHT = 0.3


@dataclass(frozen=True)
class Measures:
    """``received`` [T]; ``unmeasured_attention`` and ``unmeasured_mlp`` [L, T] bool (see the module docstring)."""

    received: np.ndarray
    unmeasured_attention: np.ndarray
    unmeasured_mlp: np.ndarray

    def unmeasured(self, node: Node) -> bool:
        """Whether ``node``'s incoming shares are a convention rather than a measurement."""
        kind, layer, p = node
        if kind == "attention":
            return bool(self.unmeasured_attention[layer, p])
        if kind in ("mlp", "block"):
            return bool(self.unmeasured_mlp[layer, p])
        return False


def measures_of(source, contributions: Contributions) -> Measures:
    """``Measures`` of one trace (``core.model.trace.Trace``, or an encoder-decoder stack's
    ``core.causal.flow_stack.RecordedPass``) and its contributions.

    A node is unmeasured when its residual part has proximity 0 and still gets share 1: only the degenerate case of
    ``core.causal.flow`` gives it that (a share of 1 with proximity 0 means every other part's proximity is 0 too)."""
    stack = stack_of(source)
    layers, t = stack.num_layers, stack.num_tokens
    received = np.zeros(t)
    attention, mlp = np.zeros((layers, t), bool), np.zeros((layers, t), bool)
    with torch.inference_mode():
        for layer in range(layers):
            every = stack.attention(layer)  # [H, q, k]
            weights = every.mean(axis=0)  # [q, k], the mean over heads
            readers = (every != 0).any(axis=0) & ~np.eye(t, dtype=bool)  # q may read k (q ≠ k)
            counts = readers.sum(axis=0)
            received += np.where(counts > 0, (weights * readers).sum(axis=0) / np.maximum(counts, 1), 0.0)
            block = stack.block(layer)
            whole, before = block.attention_whole, block.pre
            near = (whole.abs().sum(-1) - (whole - before).abs().sum(-1)).numpy()
            attention[layer] = (near <= 0) & (contributions.attention_residual[layer] == 1)
            whole, mid = block.mlp_whole, block.mid
            near = (whole.abs().sum(-1) - (whole - mid).abs().sum(-1)).numpy()
            mlp[layer] = (near <= 0) & (contributions.mlp_residual[layer] == 1)
    return Measures(received / max(layers, 1), attention, mlp)


NO_SHARE = ("no share can be measured here: every part of this sum is at least as far from it as zero is (each "
            "proximity max(0, ‖y‖₁ − ‖y − part‖₁) is 0), so the graph passes the residual stream on in full by "
            "convention, not by measurement")


def route_sentence(graph: RouteGraph, labels: list[str], received: np.ndarray | None = None) -> str:
    """Plain text (escape it for markdown): which earlier token carries most of the route into the chosen token,
    read off the graph's cross-position attention edges (each edge's weight: the share of its target's inputs).
    ``received``: ``Measures.received``, to name a carrier that is an attention sink as one."""
    chosen = f"“{labels[graph.position]}” (token {graph.position})"
    found = carriers(graph)
    if not found:
        return (f"At this threshold no attention edge brings information from another position into {chosen}: every "
                "edge kept stays at its own position.")
    (top, (total, layers)), rest = next(iter(found.items())), list(found.items())[1:]
    moving = [e for e in graph.edges if e.kind == "attention" and e.source[2] == top and e.target[2] != top]
    count = len(moving)
    sum_said = (f"whose shares add up to {total:.2f}" if count == 1 else
                f"whose shares add up to {total:.2f} (each a share of a different node's inputs, so their sum can "
                f"pass 1; the largest is {max(e.weight for e in moving):.2f})")
    sentence = (f"Of the edges that move information between positions on the route into {chosen}, those from "
                f"“{labels[top]}” (token {top}) carry the most: {count} edge{'s' if count != 1 else ''} in "
                f"{layer_runs(layers)}, {sum_said}.")
    if received is not None and received[top] >= SINK_WEIGHT:
        others = np.delete(received, top)
        sentence += (f" “{labels[top]}” is this text's attention sink: averaged over every head of every layer, the "
                     f"queries that may read it give it {percent(received[top])} of their attention weight"
                     + (f" (the other tokens {percent(others.mean())} on average)" if others.size else "") + ".")
    if rest:
        second, (second_total, _) = rest[0]
        sentence += (f" Next comes “{labels[second]}” (token {second}) with {second_total:.2f}"
                     + (f"; {len(rest) - 1} more position{'s' if len(rest) > 2 else ''} send less." if len(rest) > 1
                        else "."))
    return sentence


def node_sentence(contributions: Contributions, measures: Measures, node: Node, labels: list[str]) -> str:
    """Plain text: where ``node``'s inputs come from, by share (the residual stream, the MLP, the heads' keys), or
    that no share can be measured there."""
    kind, layer, p = node
    at = f"“{labels[p]}” (token {p})"
    if kind == "embedding":
        return f"The input embedding of {at}: every route to this token starts here, and nothing flows into it."
    if measures.unmeasured(node):
        what = f"layer {layer}'s attention" if kind == "attention" else f"layer {layer}'s MLP"
        return f"At {at}, after {what}, {NO_SHARE}."
    if kind in ("mlp", "block"):
        share = float(contributions.mlp[layer, p])
        return (f"Layer {layer}'s MLP brings {percent(share, 1)} of hidden state {layer + 1} at {at}; the residual stream "
                f"passed on carries the other {percent(float(contributions.mlp_residual[layer, p]), 1)}.")
    keys = contributions.key_shares[layer, p]
    order = [int(k) for k in np.argsort(-keys, kind="stable")[:3] if keys[k] > 0]
    listed = ", ".join(f"“{labels[k]}” (token {k}) {percent(keys[k], 1)}, most of it through head "
                       f"{int(np.argmax(contributions.attention[layer, p, k]))}" for k in order)
    return (f"After layer {layer}'s attention at {at}, the residual stream passed on carries "
            f"{percent(float(contributions.attention_residual[layer, p]), 1)} and the heads bring the other "
            f"{percent(float(keys.sum()), 1)}" + (f"; the most from {listed}." if listed else "."))


class Flow(NamedTuple):
    """The trace's stack the detail views read (``core.causal.flow_stack.TraceStack``), the contributions the graph is
    built from and what the sentences read beyond them (``Measures``)."""

    recorded: TraceStack
    contributions: Contributions
    measures: Measures
