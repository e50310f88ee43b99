"""How far each head looks over a long text: attention by relative distance, attention on the first token (attention
sinks, Xiao et al. 2023), and the sliding window each layer's attention was given (as the config declares it:
``sliding_windows``).

It reads the text's trace (``core.model.trace.Trace``, stack ``"self"``: one forward pass, never every head's ``[T, T]``
weights), a block of query rows at a time, each reduced to a few numbers per query and dropped. A decoder layer whose
mask is causal within its sliding window (every bundled decoder's) is summed by distance straight from its queries and
keys (``core.attention_heads.distance_sums``: ``DIRECT_BLOCK_CELLS`` scores at a time, the weights never formed); any
other layer's weights (an encoder's, another mask) are asked of ``Trace.attention``, ``BLOCK_CELLS`` at a time. Memory
held beside the trace: the layer's queries and keys (``Trace.attention_record``) and one block.

Distance ``d`` is ``query − key`` for a decoder (a query sees only keys at ``d ≥ 0``) and ``|query − key|`` for an
encoder. Bins are log-spaced: ``[0], [1], [2, 3], [4, 7], [8, 15], …``; bin ``b`` holds ``edges[b] ≤ d <
edges[b + 1]``. Averages run over the **queries**: every position of an encoder; every position but the first for a
decoder (the first can only attend to itself).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from core.attention_heads.distance_sums import block_workers, layer_sums
from core.errors import AnalysisError
from core.model.attention_layers import SINGLE_STACK
from core.model.trace import Trace

BLOCK_CELLS = 8_000_000  # cells of one block of recomputed weights [H, R, T] (32 MB of float32)
LOCAL_DISTANCE = 8  # "local": attention within this many tokens (d < 8)
LOCAL_SHARE = 0.5  # a head is local when at least this share of its attention is local …
SINK_SHARE = 0.5  # … a sink head when at least this share lands on the sink positions …
FAR_SHARE = 0.25  # … a long-range head when at least this share (and uniform's) goes past the far distance, sink excluded
FAR_DISTANCE = 256  # the far distance of a model without a sliding window (with one: the smallest window)


def distance_edges(max_distance: int) -> np.ndarray:
    """int ``[B + 1]``: 0, 1, 2, 4, 8, … up to the first power of two past ``max_distance``, the last edge cut to
    ``max_distance + 1``, so the bins cover distances 0 … ``max_distance`` exactly."""
    edges = [0, 1]
    while edges[-1] <= max_distance:
        edges.append(edges[-1] * 2)
    edges[-1] = max_distance + 1
    return np.array(edges, dtype=np.int64)


def bin_labels(edges: Sequence[int]) -> list[str]:
    """``["0", "1", "2–3", "4–7", …]``: the distances each bin holds."""
    return [str(lo) if hi - lo == 1 else f"{lo}–{hi - 1}" for lo, hi in zip(edges[:-1], edges[1:], strict=True)]


def sliding_windows(config, num_layers: int) -> tuple[int | None, ...]:
    """Each layer's sliding window in tokens from the model's config (None: the layer sees every earlier token).
    ``layer_types`` names the layers that slide (Gemma 2/3, Qwen2 …); without it a ``sliding_window`` applies to every
    layer (Mistral), unless ``use_sliding_window`` is False. A query at ``i`` then sees keys ``j`` with ``i − j <
    window``, as transformers' masks do."""
    window = getattr(config, "sliding_window", None)
    if not isinstance(window, int) or window <= 0 or getattr(config, "use_sliding_window", True) is False:
        return (None,) * num_layers
    types = getattr(config, "layer_types", None)
    if types is None:
        return (window,) * num_layers
    return tuple(window if "sliding" in str(kind) else None for kind in list(types)[:num_layers])


@dataclass(frozen=True, eq=False)
class LongContextProfile:
    """What ``long_context_profile`` measured (``L`` layers, ``H`` heads, ``B`` distance bins, ``T`` tokens):

    ``edges`` int ``[B + 1]`` (``distance_edges``); ``shares`` float ``[L, H, B]``: the mean over the queries of the
    share of each query's attention at those distances (each query's shares sum to 1); ``uniform`` ``[L, B]``: the
    same for attention spread evenly over the keys each query may see (the layer's window and causality included):
    the chance level. ``sink_positions``: the positions counted as the sink; ``sink`` ``[L, H, T]``: each query
    position's share on them (NaN for a query that is not averaged); ``sink_uniform``: uniform attention's
    share on them per layer ``[L, T]``; ``far_distance`` and ``far`` ``[L, H]``: the mean share at distance ≥ ``far_distance`` to keys
    other than the sink (``far_uniform`` ``[L]``: uniform's); ``windows``: each layer's sliding window or None."""

    edges: np.ndarray
    shares: np.ndarray
    uniform: np.ndarray
    sink_positions: tuple[int, ...]
    sink: np.ndarray
    sink_uniform: np.ndarray
    far_distance: int
    far: np.ndarray
    far_uniform: np.ndarray
    windows: tuple[int | None, ...]
    causal: bool
    input_ids: tuple[int, ...]

    @property
    def num_tokens(self) -> int:
        return len(self.input_ids)

    @property
    def queries(self) -> np.ndarray:
        """The query positions averaged over: all of an encoder's, all but the first of a decoder's."""
        return np.arange(1 if self.causal else 0, self.num_tokens)

    @property
    def local(self) -> np.ndarray:
        """``[L, H]``: the mean share at distance < ``LOCAL_DISTANCE`` (the bins below it; edges are powers of 2)."""
        return self.shares[..., self.edges[1:] <= LOCAL_DISTANCE].sum(axis=-1)

    @property
    def local_uniform(self) -> np.ndarray:
        return self.uniform[..., self.edges[1:] <= LOCAL_DISTANCE].sum(axis=-1)

    @property
    def sink_mean(self) -> np.ndarray:
        """``[L, H]``: the mean over the queries of the share on the sink positions."""
        return self.sink[..., self.queries].mean(axis=-1)

    @property
    def sink_uniform_mean(self) -> np.ndarray:
        """``[L]``: uniform attention's mean share on the sink positions, per layer."""
        return self.sink_uniform[:, self.queries].mean(axis=-1)


def _range_sums(cumulative: torch.Tensor, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """float64 ``[H, R, n]``: each row's weight over its keys ``starts[r, c] … ends[r, c] − 1`` (local key indices,
    clipped to the block's ``K`` keys), from ``cumulative`` ``[H, R, K]`` (the running sum over a row's keys)."""
    keys = cumulative.shape[-1]
    starts, ends = np.clip(starts, 0, keys), np.clip(ends, 0, keys)

    def upto(stop: np.ndarray) -> np.ndarray:  # the weight of keys 0 … stop − 1 (0 when stop is 0)
        index = torch.from_numpy(np.maximum(stop - 1, 0)).expand(cumulative.shape[0], *stop.shape)
        return np.where(stop > 0, torch.gather(cumulative, -1, index).double().numpy(), 0.0)

    return upto(np.maximum(ends, starts)) - upto(starts)


def _uniform_weights(rows: np.ndarray, t: int, causal: bool, window: int | None) -> np.ndarray:
    """``[1, R, T]``: attention spread evenly over the keys each query position in ``rows`` may see."""
    keys = np.arange(t)[None, :]
    distance = rows[:, None] - keys
    visible = distance >= 0 if causal else np.ones_like(distance, dtype=bool)
    if window is not None:
        visible &= np.abs(distance) < window
    return (visible / visible.sum(axis=-1, keepdims=True))[None]


def reduce_block(weights, rows: np.ndarray, edges: np.ndarray, sinks: list[int], far: int, causal: bool,
                 first_key: int = 0):
    """``(bins [H, R, B], sink [H, R], far [H, R])`` float64 of one block of weights ``[H, R, K]`` (numpy or torch)
    for the query positions ``rows`` and the keys ``first_key … first_key + K − 1`` (every key a row may see): per
    distance bin, on the sinks, and at distance ≥ ``far`` with the sinks excluded. One running sum over each row's keys
    (torch accumulates a float32 one in float64), then two reads of it per bin and row, no loop over rows or keys."""
    weights = torch.as_tensor(weights)
    cumulative = torch.cumsum(weights, dim=-1)
    i = rows[:, None] - first_key  # [R, 1]: the query's own key, local
    lo, hi = edges[:-1][None, :], edges[1:][None, :]  # [1, B]
    bins = _range_sums(cumulative, i - hi + 1, i - lo + 1)  # keys before (or at) the query: j in (i − hi, i − lo]
    far_sums = _range_sums(cumulative, np.zeros_like(i), i - far + 1)[..., 0]  # j ≤ i − far
    if not causal:  # keys after the query: j in [i + max(lo, 1), i + hi), and j ≥ i + far
        bins += _range_sums(cumulative, i + np.maximum(lo, 1), i + hi)
        far_sums += _range_sums(cumulative, i + far, np.full_like(i, weights.shape[-1]))[..., 0]
    sink = np.zeros(weights.shape[:2])
    for position in sinks:
        if first_key <= position < first_key + weights.shape[-1]:
            share = weights[..., position - first_key].double().numpy()
            sink += share
            far_sums -= share * (np.abs(rows - position) >= far)[None]
    return bins, sink, far_sums


def _keys_of(rows: np.ndarray, t: int, causal: bool, window: int | None) -> slice:
    """The keys the query positions ``rows`` may see: a decoder's up to its last row, from the first its window keeps."""
    if not causal:
        return slice(0, t)
    return slice(0 if window is None else max(0, int(rows[0]) - window + 1), int(rows[-1]) + 1)


def _plain_causal(trace: Trace, layer: int, record, window: int | None, t: int) -> bool:
    """Whether ``layer``'s mask is exactly causal within its sliding window (what ``block_sums`` applies), with no
    position bias: else its weights are read from ``Trace.attention``."""
    if record.position_bias is not None:
        return False
    if record.mask is None:
        return bool(record.causal) and (window is None or window >= t)
    rule = np.tril(np.ones((t, t), dtype=bool))
    return np.array_equal(trace.mask(SINGLE_STACK, layer), rule if window is None else np.triu(rule, 1 - window))


def long_context_profile(trace: Trace, *, sink_positions: Sequence[int] = (0,),
                         progress: Callable[[int, int], None] | None = None) -> LongContextProfile:
    """Every head's attention by distance, on the sink and past the far distance, over the text of ``trace`` (see the
    module docstring). ``progress(done, total)``: before the first layer (``done = 0``) and after each layer."""
    if SINGLE_STACK not in trace.stacks:
        raise AnalysisError(f"{trace.model_name} is an encoder-decoder; this view reads models with one stack of layers.")
    ids = list(trace.tokens(SINGLE_STACK).ids)
    t = len(ids)
    if t < 2:
        raise AnalysisError("The text needs at least two tokens to measure how far attention goes.")
    infos = [trace.layer_info(SINGLE_STACK, layer) for layer in range(trace.num_layers(SINGLE_STACK))]
    causal = not np.triu(trace.mask(SINGLE_STACK, 0), 1).any()  # no query may read a later key (a decoder)
    windows = tuple(info.sliding_window for info in infos)  # what each layer's attention was given
    present = [w for w in windows if w is not None]
    far = min(present) if present else FAR_DISTANCE
    edges = distance_edges(t - 1)
    sinks = sorted({int(p) for p in sink_positions if 0 <= int(p) < t})
    queries_of = np.arange(1 if causal else 0, t)
    layers, heads, bins = len(infos), infos[0].heads, len(edges) - 1
    shares = np.zeros((layers, heads, bins))
    uniform = np.zeros((layers, bins))
    far_share = np.zeros((layers, heads))
    far_uniform = np.zeros(layers)
    sink = np.full((layers, heads, t), np.nan, dtype=np.float32)
    sink_uniform = np.full((layers, t), np.nan)
    block = max(1, BLOCK_CELLS // (heads * t))
    starts = range(int(queries_of[0]), t, block)
    even = {}  # window -> (bins [B], sink [T], far): uniform attention's, per distinct window
    for window in dict.fromkeys(windows):
        even_bins, even_sink, even_far = np.zeros(bins), np.full(t, np.nan), 0.0
        for start in starts:
            rows = np.arange(start, min(start + block, t))
            b, s, f = reduce_block(_uniform_weights(rows, t, causal, window), rows, edges, sinks, far, causal)
            even_bins += b[0].sum(axis=0)
            even_sink[rows] = s[0]
            even_far += float(f[0].sum())
        even[window] = (even_bins, even_sink, even_far)
    if progress:
        progress(0, layers)
    cuts = np.union1d(edges, [far])  # distance segments: the bins, the far distance cutting one of them
    to_bins = ((edges[:-1, None] <= cuts[None, :-1]) & (cuts[None, :-1] < edges[1:, None])).T.astype(np.float64)
    sink_far = np.abs(np.arange(t)[:, None] - np.array(sinks, dtype=np.int64)[None, :]) >= far  # [T, P]
    with block_workers() as pool:  # a decoder's queries and keys: the next layer's computed beside this one's sums
        pending = pool.submit(trace.attention_record, SINGLE_STACK, 0) if causal else None
        for layer in range(layers):
            record = pending.result() if pending is not None else None
            pending = pool.submit(trace.attention_record, SINGLE_STACK, layer + 1) if causal and layer + 1 < layers else None
            direct = record is not None and _plain_causal(trace, layer, record, windows[layer], t)
            if direct:
                segments, on_sinks = layer_sums(record, int(queries_of[0]), cuts, windows[layer], sinks, pool)
                shares[layer] = (segments @ to_bins).sum(axis=1)
                sink[layer][:, queries_of] = on_sinks.sum(axis=-1)
                far_share[layer] = (segments[..., cuts[:-1] >= far].sum(axis=-1)
                                    - (on_sinks * sink_far[queries_of]).sum(axis=-1)).sum(axis=1)
            for start in () if direct else starts:  # weights read a block of rows at a time
                rows = np.arange(start, min(start + block, t))
                keys = _keys_of(rows, t, causal, windows[layer])
                weights = trace.attention(SINGLE_STACK, layer, rows=slice(rows[0], rows[-1] + 1), keys=keys)  # [H, R, K]
                bin_sums, sink_sums, far_sums = reduce_block(weights, rows, edges, sinks, far, causal, keys.start)
                shares[layer] += bin_sums.sum(axis=1)
                sink[layer][:, rows] = sink_sums
                far_share[layer] += far_sums.sum(axis=1)
            uniform[layer], sink_uniform[layer], far_uniform[layer] = even[windows[layer]]
            if progress:
                progress(layer + 1, layers)
    count = len(queries_of)
    return LongContextProfile(
        edges=edges, shares=(shares / count).astype(np.float32), uniform=(uniform / count).astype(np.float32),
        sink_positions=tuple(sinks), sink=sink, sink_uniform=sink_uniform.astype(np.float32), far_distance=far,
        far=(far_share / count).astype(np.float32), far_uniform=(far_uniform / count).astype(np.float32),
        windows=windows, causal=causal, input_ids=tuple(ids),
    )


def head_kinds(profile: LongContextProfile) -> np.ndarray:
    """str ``[L, H]`` from the numbers, in this order: "sink" (≥ ``SINK_SHARE`` on the sink positions), "local"
    (≥ ``LOCAL_SHARE`` within ``LOCAL_DISTANCE`` tokens), "long-range" (at distance ≥ ``far_distance``, sink
    excluded, at least ``FAR_SHARE`` and at least what uniform attention puts there in its layer), else "between"."""
    kinds = np.full(profile.far.shape, "between", dtype=object)
    kinds[(profile.far >= FAR_SHARE) & (profile.far >= profile.far_uniform[:, None])] = "long-range"
    kinds[profile.local >= LOCAL_SHARE] = "local"
    kinds[profile.sink_mean >= SINK_SHARE] = "sink"
    return kinds


def text_ids(tokenizer, text: str, max_tokens: int) -> tuple[list[int], int, bool]:
    """``(ids, tokens before the cut, first_is_added)``: ``text`` tokenised with the tokenizer's own special tokens
    and cut to ``max_tokens``; ``first_is_added``: position 0 is a token the tokenizer adds (BOS, [CLS]), not text."""
    total = len(tokenizer(text, add_special_tokens=True)["input_ids"])
    ids = tokenizer(text, add_special_tokens=True, truncation=True, max_length=max_tokens)["input_ids"]
    prefix = tokenizer("", add_special_tokens=True)["input_ids"]
    first_is_added = bool(prefix) and bool(ids) and ids[0] == prefix[0]
    return list(ids), total, first_is_added
