"""Information flow routes (Ferrando & Voita, 2024): which attention edges and MLPs carried what the model wrote.

Each sub-block of a pre-norm block adds an update to the residual stream, and the update of attention is a sum of
one term per (head, key position): ``residual_mid[i] = residual_pre[i] + Σ_h Σ_j t[i, j, h] (+ the output bias)``,
``t[i, j, h] = A_h[i, j] · v_{kv(h)}[j] · W_Oʰ`` (times the frozen scale of a norm on the attention output, as in
Gemma 2/3). The *contribution* of one part ``z`` of a sum ``y`` is its proximity ``max(0, ‖y‖₁ − ‖y − z‖₁)``,
normalised over the parts so that each node's incoming contributions are ≥ 0 and add up to 1 (the measure of the
paper and of Meta's LLM Transparency Tool). The output projection's bias is not a part (as there).

Post-norm blocks (BERT, MiniLM, DistilBERT) add an update and then normalise: ``mid = LN(x + Σ t + b)``, ``post =
LN(mid + mlp)``. There the parts are those of the sum before the norm (``y = x + Σ t + b``: ``x`` and each ``t``;
``mid + mlp``: ``mid`` and the MLP's output). The LN-aware split (each part centred and divided by the sum's
frozen standard deviation, then times the gain) divides every part and the sum by the same number per position,
which cancels in the shares; what it adds, the centring and the gain per dimension, would weigh the dimensions of
the L1 distance unevenly, so the shares here are those of the stream's own coordinates, as for pre-norm blocks.

Shapes (``L`` layers, ``T`` tokens, ``H`` query heads)::

    Contributions.attention            [L, T (query), T (key), H]   into the residual after attention
    Contributions.attention_residual   [L, T]                       the residual's own share there
    Contributions.mlp                  [L, T]                       the MLP's share of the residual after the MLP
    Contributions.mlp_residual         [L, T]                       the residual's share there

For every layer and query ``i``: ``attention[l, i].sum() + attention_residual[l, i] == 1`` and
``mlp[l, i] + mlp_residual[l, i] == 1``.

The graph (``route_graph``) has a node per representation: ``("embedding", -1, p)`` the input token ``p``,
``("attention", l, p)`` the residual after block ``l``'s attention, ``("mlp", l, p)`` block ``l``'s MLP, and
``("block", l, p)`` the residual after block ``l``; it keeps the edges above the threshold that lead to the chosen
token's last representation. An encoder-decoder's graph (``core.causal.flow_pair``) adds cross-attention nodes and edges.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from core.causal.flow_stack import stack_of
from core.model.attention_layers import SINGLE_STACK
from core.model.models import LoadedModel, threads_for_input
from core.model.parts import layer_parts
from core.model.recording import LayerRecord
from core.model.trace import record as record_trace

DEFAULT_THRESHOLD = 0.04  # an edge is drawn when it carries at least this share of its node's inputs
QUERY_CHUNK_CELLS = 8_000_000  # floats of head terms held at once (queries × keys × heads × hidden)

Node = tuple[str, int, int]  # (kind, layer, position); kind in embedding, attention, mlp, block


@dataclass(frozen=True, eq=False)
class Contributions:
    """Each node's incoming contributions (see the module docstring for shapes)."""

    attention: np.ndarray
    attention_residual: np.ndarray
    mlp: np.ndarray
    mlp_residual: np.ndarray
    tokens: list[str]

    @property
    def num_layers(self) -> int:
        return self.attention.shape[0]

    num_positions = property(lambda self: self.attention.shape[1])

    @cached_property
    def key_shares(self) -> np.ndarray:
        """``[L, T (query), T (key)]``: each key position's share summed over the heads (computed once)."""
        return self.attention.sum(axis=3)

    def last(self, position: int) -> Node:
        """The node a route into ``position`` starts from: its residual after the last block."""
        return ("block", self.num_layers - 1, position)

    def incoming(self, node: Node, threshold: float) -> list[Edge]:
        return stack_incoming(self, node, threshold)


@dataclass(frozen=True)
class Edge:
    """One edge of the route graph: ``weight`` is the share of ``target``'s inputs that came from ``source``.

    ``kind``: "attention" (through heads; ``heads`` [H] each head's share, summing to ``weight``), "residual" (the
    stream passed on unchanged) or "mlp" (into and out of an MLP node)."""

    source: Node
    target: Node
    weight: float
    kind: str
    heads: tuple[float, ...] = ()

    @property
    def top_head(self) -> int | None:
        return int(np.argmax(self.heads)) if self.heads else None


@dataclass(frozen=True)
class RouteGraph:
    """The edges above ``threshold`` reachable backwards from ``("block", L - 1, position)``, and their nodes."""

    position: int
    threshold: float
    edges: tuple[Edge, ...]

    @property
    def nodes(self) -> list[Node]:
        seen = dict.fromkeys(n for e in self.edges for n in (e.source, e.target))
        return list(seen) or [("block", -1, self.position)]


def proximity_shares(parts: torch.Tensor, whole: torch.Tensor) -> torch.Tensor:
    """``parts`` ``[..., P, D]`` of ``whole`` ``[..., D]`` → shares ``[..., P]``: max(0, ‖y‖₁ − ‖y − z‖₁), normalised
    to sum to 1 (all to the last part, the residual, in the degenerate case where every proximity is 0)."""
    near = (whole.abs().sum(-1, keepdim=True) - (whole.unsqueeze(-2) - parts).abs().sum(-1)).clamp(min=0)
    total = near.sum(-1, keepdim=True)
    fallback = torch.zeros_like(near)
    fallback[..., -1] = 1.0
    return torch.where(total > 0, near / total.clamp(min=torch.finfo(near.dtype).tiny), fallback)


def record_output_map(record: LayerRecord) -> tuple[torch.Tensor, torch.Tensor]:
    """``(W [Hq·d, D], b [D])`` of the output projection of the attention layer that made ``record`` (``core.model.parts``:
    whatever it is called, in any stack; ``nn.Linear`` or GPT-2's ``Conv1D``): the affine map's value at 0 is ``b``
    and at each unit vector ``b`` plus a row of ``W``."""
    heads, d = record.queries.shape[1], record.queries.shape[3]
    module = layer_parts(record.module).output_projection  # core.model.parts: the one lookup of a model's parts
    weight = module.weight
    with torch.inference_mode():
        zero = module(torch.zeros(1, heads * d, dtype=weight.dtype)).float()[0]
        if isinstance(module, torch.nn.Linear):  # y = x Wᵀ + b: no need to map the unit vectors
            return weight.detach().float().T, zero
        return module(torch.eye(heads * d, dtype=weight.dtype)).float() - zero, zero


def head_terms(source, layer: int, rows: slice | None = None, *, through_norm: bool = True) -> torch.Tensor:
    """``[q, T (key), H, D]``: what each head wrote into each query's residual stream from each key position,
    ``t[i, j, h]``, for the queries ``rows`` (all when None). Σ over keys and heads is the attention update less the
    output bias (through the frozen scale of a norm on the attention output, where the block has one).
    ``source``: a ``Trace`` or a ``core.causal.flow_stack`` stack; ``through_norm=False``: the terms of the attention
    output itself, before such a norm."""
    rows = slice(None) if rows is None else rows
    stack = stack_of(source)
    block = stack.block(layer)
    written = _written(block.record, record_output_map(block.record)[0])
    with torch.inference_mode():
        weights = torch.from_numpy(stack.attention(layer)).permute(1, 2, 0)[rows]  # [q, T, H]
        terms = weights[..., None] * written[None]
        factor = block.norm_factor if through_norm else None
        if factor is not None:  # a norm on the attention output, its scale frozen at this pass, per position
            terms = terms * factor[rows, None, None, :]
    return terms


def _written(record: LayerRecord, projection: torch.Tensor) -> torch.Tensor:
    """``[T (key), H, D]``: what each head writes from each key position at weight 1, value · W_Oʰ (one einsum)."""
    heads, d = record.queries.shape[1], record.queries.shape[3]
    values = record.values[0].float()[[h // record.kv_groups for h in range(heads)]]  # [H, T, d]
    with torch.inference_mode():
        return torch.einsum("hjd,hdD->jhD", values, projection.reshape(heads, d, -1)).contiguous()


def _query_rows(start: int, reach: np.ndarray, cells_per_key: int) -> int:
    """How many queries from ``start`` fit in ``QUERY_CHUNK_CELLS`` cells, each query reading the keys up to the
    furthest one any query of the chunk reaches (``reach[i]``: one past query i's last key of non-zero weight)."""
    budget = max(1, QUERY_CHUNK_CELLS // max(1, cells_per_key))
    stop = start + 1
    while stop < len(reach) and (stop + 1 - start) * int(reach[start:stop + 1].max()) <= budget:
        stop += 1
    return stop


def attention_shares(source, layer: int) -> tuple[np.ndarray, np.ndarray]:
    """``(attention [T, T, H], residual [T])`` shares of block ``layer``'s residual after attention.

    The proximity of every (head, key) term at once per chunk of queries, ``‖y − A_h[i, j] · w_h[j]‖₁`` with one
    ``addcmul`` and one reduction over ``[q, k·H, D]``; keys a query gives weight 0 in every head (the later keys of
    a causal model) are not computed: their terms are 0, and so is their proximity."""
    stack = stack_of(source)
    block = stack.block(layer)
    t, heads = stack.num_tokens, block.record.queries.shape[1]
    before, whole = block.pre, block.attention_whole
    written = _written(block.record, record_output_map(block.record)[0])  # [T, H, D]
    factor = block.norm_factor
    weights = torch.from_numpy(stack.attention(layer)).permute(1, 2, 0)  # [q, k, H]
    nonzero = (weights != 0).any(dim=2)  # [q, k]
    reach = np.where(nonzero.any(1).numpy(), t - nonzero.flip(1).int().argmax(1).numpy(), 0)
    near = torch.zeros(t, t, heads)
    with torch.inference_mode():
        size = whole.abs().sum(-1)  # [T]
        near_residual = (size - (whole - before).abs().sum(-1)).clamp(min=0)
        start = 0
        while start < t:
            stop = _query_rows(start, reach, heads * whole.shape[1])
            keys = int(reach[start:stop].max())
            if keys:
                q = stop - start
                a = weights[start:stop, :keys].reshape(q, keys * heads, 1)  # [q, k·H, 1]
                y = whole[start:stop, None]  # [q, 1, D]
                terms = written[:keys].reshape(1, keys * heads, -1)  # [1, k·H, D]
                if factor is None:
                    rest = torch.addcmul(y, a, terms, value=-1.0)  # y − each term, [q, k·H, D]
                else:
                    rest = torch.sub(y, a * terms * factor[start:stop, None])
                distance = rest.abs_().sum(-1)  # [q, k·H]
                proximity = (size[start:stop, None] - distance).clamp_(min=0).masked_fill_(a[..., 0] == 0, 0.0)
                near[start:stop, :keys] = proximity.reshape(q, keys, heads)
            start = stop
        total = near.sum(dim=(1, 2)) + near_residual  # [T]
        has_any = total > 0
        scale = torch.where(has_any, 1 / total.clamp(min=torch.finfo(total.dtype).tiny), 0.0)
        attention = near * scale[:, None, None]
        residual = torch.where(has_any, near_residual * scale, 1.0)  # all to the residual when nothing is near
    return attention.numpy(), residual.numpy()


def contributions_of(source, tokens: list[str],
                     progress: Callable[[int, int], None] | None = None) -> Contributions:
    """``Contributions`` from one trace (``core.model.trace.Trace``, stack ``"self"``) or an encoder-decoder stack's
    ``core.causal.flow_stack.RecordedPass``; ``progress(done, total)`` after each layer."""
    stack = stack_of(source)
    layers, t = stack.num_layers, stack.num_tokens
    attention = np.zeros((layers, t, t, stack.block(0).record.queries.shape[1]), np.float32)
    attention_residual, mlp, mlp_residual = (np.zeros((layers, t), np.float32) for _ in range(3))
    # One torch thread: on the shared 2-core machine two threads wait for each other (SmolLM2, 32 tokens, load 20:
    # 1.0–1.2 s on one thread, 21–24 s on two). threads_for_input(0) is the app's one-thread section.
    with threads_for_input(0):
        for layer in range(layers):
            attention[layer], attention_residual[layer] = attention_shares(stack, layer)
            block = stack.block(layer)  # the trace keeps its last blocks: not computed again
            mid, whole = block.mid, block.mlp_whole
            parts = torch.stack([whole - mid, mid], dim=1)  # [T, 2, D]: the MLP's update, the residual
            shares = proximity_shares(parts, whole).numpy()
            mlp[layer], mlp_residual[layer] = shares[:, 0], shares[:, 1]
            if progress is not None:
                progress(layer + 1, layers)
    return Contributions(attention, attention_residual, mlp, mlp_residual, list(tokens))


def contributions(model: LoadedModel, text: str, *, max_tokens: int | None = None,
                  progress: Callable[[int, int], None] | None = None) -> Contributions:
    """Record ``model``'s trace of ``text`` and return every node's incoming contributions."""
    trace = record_trace(model, text, max_tokens=max_tokens)
    return contributions_of(trace, list(trace.tokens(SINGLE_STACK).tokens), progress)


def stack_incoming(contributions: Contributions, node: Node, threshold: float, prefix: str = "") -> list[Edge]:
    """The edges into ``node`` of one stack's graph (attention edges only above ``threshold``, summed over heads;
    the others always, for the caller to filter); ``prefix`` starts every node kind of this stack ("encoder_" for
    an encoder-decoder's encoder)."""
    kind, layer, p = node[0].removeprefix(prefix), node[1], node[2]
    def at(kind: str, layer: int, p: int) -> Node:
        return (prefix + kind, layer, p) if kind != "block" or layer >= 0 else (prefix + "embedding", -1, p)

    if kind == "block":
        return [Edge(at("mlp", layer, p), node, float(contributions.mlp[layer, p]), "mlp"),
                Edge(at("attention", layer, p), node, float(contributions.mlp_residual[layer, p]), "residual")]
    if kind == "mlp":
        return [Edge(at("attention", layer, p), node, float(contributions.mlp[layer, p]), "mlp")]
    if kind == "attention":
        shares = contributions.attention[layer, p]  # [T, H]
        edges = [Edge(at("block", layer - 1, p), node, float(contributions.attention_residual[layer, p]), "residual")]
        summed = contributions.key_shares[layer, p]  # [T]
        for key in np.flatnonzero(summed > threshold):
            edges.append(Edge(at("block", layer - 1, int(key)), node, float(summed[key]), "attention", tuple(shares[key].tolist())))
        return edges
    return []


KIND_ORDER = {"embedding": 0, "attention": 1, "cross": 2, "mlp": 3, "block": 4}


def edge_order(edge: Edge) -> tuple:
    """Sort key of a graph's edges: an encoder's before the decoder's, then by the target's layer and kind."""
    kind = edge.target[0]
    return (not kind.startswith("encoder_"), edge.target[1], KIND_ORDER[kind.removeprefix("encoder_")],
            edge.target[2], edge.source[2], edge.kind)


def route_graph(contributions, position: int, threshold: float = DEFAULT_THRESHOLD) -> RouteGraph:
    """The route to ``position``'s last representation: every edge whose weight is above ``threshold`` and from
    whose target the chosen node can be reached along such edges (searched from the top down). ``contributions``:
    ``Contributions`` of one stack, or ``core.causal.flow_pair.PairContributions`` (``position`` a decoder position; the
    route crosses into the encoder's last layer and down to the source tokens)."""
    t = contributions.num_positions
    if not 0 <= position < t:
        raise ValueError(f"position {position} is outside the text's {t} tokens")
    kept: dict[tuple[Node, Node, str], Edge] = {}
    stack, visited = [contributions.last(position)], set()
    while stack:
        node = stack.pop()
        if node in visited:
            continue
        visited.add(node)
        for edge in contributions.incoming(node, threshold):
            if edge.weight > threshold:
                kept[(edge.source, edge.target, edge.kind)] = edge
                stack.append(edge.source)
    return RouteGraph(position, float(threshold), tuple(sorted(kept.values(), key=edge_order)))


def carriers(graph: RouteGraph) -> dict[int, tuple[float, list[int]]]:
    """``{position: (summed weight, layers)}`` of the graph's attention edges that move information from ``position``
    to another position, heaviest first: which earlier tokens carry the route, and through which layers."""
    found: dict[int, tuple[float, set[int]]] = {}
    for edge in graph.edges:
        if edge.kind == "attention" and edge.source[2] != edge.target[2]:
            total, layers = found.get(edge.source[2], (0.0, set()))
            found[edge.source[2]] = (total + edge.weight, layers | {edge.target[1]})
    ordered = sorted(found.items(), key=lambda item: -item[1][0])
    return {p: (total, sorted(layers)) for p, (total, layers) in ordered}


def layer_runs(layers: list[int]) -> str:
    """``[2, 5, 6, 7, 12]`` → ``"layers 2, 5–7 and 12"`` (``"layer 3"`` for one)."""
    spans: list[list[int]] = []
    for layer in sorted(set(layers)):
        if spans and layer == spans[-1][1] + 1:
            spans[-1][1] = layer
        else:
            spans.append([layer, layer])
    parts = [f"{a}" if a == b else f"{a}–{b}" for a, b in spans]
    if len(parts) == 1:
        return ("layer " if spans[0][0] == spans[0][1] else "layers ") + parts[0]
    return "layers " + ", ".join(parts[:-1]) + " and " + parts[-1]


