"""A decoder layer's attention summed by distance, straight from its queries and keys: what
``core.attention_heads.long_context`` reads for every head of every layer of a long text, without forming the weights
as ``Trace.attention`` hands them out.

A block of query rows ``i0 … i1 − 1`` and the keys ``k0 … i1 − 1`` they may see (``K`` keys): the scores of every query
head are one batched product per key/value head (grouped-query attention: the key head is read once for the query
heads sharing it), in float32, with the keys in **reverse order**; then the soft-cap, the mask (future keys and keys
past the sliding window set to −∞) and ``exp(score − row max)``, as the float32 softmax of eager attention computes it,
left unnormalised. In reverse key order, row ``r``'s key at distance ``d`` is column ``d + R − 1 − r``, so the view of
the block with a row stride of ``K − 1`` (``torch.Tensor.as_strided``) puts distance ``d`` in column ``d`` for every
row: each row's cells at distances ``0 … K − 2`` are its own keys or, past its first key, the masked (zero) future
cells of the next row. A distance bin is then a slice of columns summed, the same slice for every row, and the one cell
the view leaves out (the last row's key ``k0``, distance ``K − 1``) is added alone. Each row's sums are divided by its
total: the shares of eager attention's weights, equal within float32 rounding (bit for bit the same scores when the
scaling is a power of two, as ``1/√64``).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
import torch

from core.model.recording import LayerRecord

DIRECT_BLOCK_CELLS = 2_000_000  # cells of one block of scores [Hq, R, T] (8 MB of float32)


def reversed_keys(record: LayerRecord) -> tuple[torch.Tensor, torch.Tensor]:
    """``(queries × scaling [Hq, T, d], keys in reverse position order [Hkv, S, d])`` float32 of one layer's record."""
    queries = record.queries[0].float() * float(record.scaling)
    return queries, record.keys[0].float().flip(1).contiguous()


def block_sums(queries: torch.Tensor, keys_reversed: torch.Tensor, rows: slice, first_key: int, cuts: np.ndarray,
               softcap: float | None, window: int | None, sinks: list[int]
               ) -> tuple[np.ndarray, np.ndarray]:
    """``(segments [H, R, C − 1], sink [H, R, P])`` float64: for the query rows ``rows`` (``i0 … i1 − 1``) of a causal
    layer seeing keys ``first_key … i1 − 1``, each row's share of attention at distances ``cuts[c] ≤ d < cuts[c + 1]``
    (``cuts`` increasing from 0, its last past every distance) and on each key position of ``sinks``. ``queries`` and
    ``keys_reversed`` from ``reversed_keys``; ``window``: keys at distance ≥ ``window`` are masked."""
    i0, i1 = rows.start, rows.stop
    heads, kv, r, k = queries.shape[0], keys_reversed.shape[0], i1 - i0, i1 - first_key
    t = keys_reversed.shape[1]
    block = queries[:, i0:i1].reshape(kv, heads // kv * r, -1)
    scores = torch.bmm(block, keys_reversed[:, t - i1: t - first_key].transpose(1, 2)).view(heads, r, k)
    if softcap:
        scores.div_(softcap).tanh_().mul_(softcap)
    row = torch.arange(r)[:, None]
    width = min(r, k)
    future = torch.arange(width)[None, :] < r - 1 - row  # reversed columns 0 … R − 2: keys after the row's query
    scores[..., :width].masked_fill_(future, float("-inf"))
    if window is not None and k > window:  # keys at distance ≥ window: reversed column ≥ window + R − 1 − r
        columns = torch.arange(window, k)[None, :]
        scores[..., window:].masked_fill_(columns >= window + r - 1 - row, float("-inf"))
    scores.sub_(scores.amax(dim=-1, keepdim=True)).exp_()
    by_distance = scores.as_strided((heads, r, k - 1), (r * k, k - 1, 1), scores.storage_offset() + r - 1)
    edges = np.clip(cuts, 0, k - 1)
    segments = torch.stack([by_distance[..., lo:hi].sum(dim=-1) for lo, hi in zip(edges[:-1], edges[1:], strict=True)],
                           dim=-1).double()
    last = int(np.searchsorted(cuts, k - 1, side="right")) - 1  # the segment of distance K − 1: the last row's key k0
    segments[:, -1, last] += scores[:, -1, k - 1].double()
    total = segments.sum(dim=-1, keepdim=True)
    sink = torch.zeros(heads, r, len(sinks), dtype=torch.float64)
    for p, position in enumerate(sinks):
        if first_key <= position < i1:
            sink[..., p] = scores[:, :, i1 - 1 - position]
    return (segments / total).numpy(), (sink / total).numpy()


@contextmanager
def block_workers() -> Iterator[ThreadPoolExecutor]:
    """Within: as many threads of this process as torch's own setting, each running torch on one thread (restored
    after): independent blocks (and the next layer's queries and keys) on them wait for no other thread at an
    operation's end, which a core held by another job would make every operation do."""
    workers = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(workers) as pool:
            yield pool
    finally:
        torch.set_num_threads(workers)


def layer_sums(record: LayerRecord, first_row: int, cuts: np.ndarray, window: int | None, sinks: list[int],
               pool: ThreadPoolExecutor) -> tuple[np.ndarray, np.ndarray]:
    """``(segments [H, R, C − 1], sink [H, R, P])`` of ``block_sums`` for every query row from ``first_row`` on of
    a causal layer's ``record``, in blocks of at most ``DIRECT_BLOCK_CELLS`` scores run on ``pool``
    (``block_workers``), each block seeing the keys from the first its window keeps."""
    queries, keys_reversed = reversed_keys(record)
    heads, t = queries.shape[0], queries.shape[1]
    step = max(1, DIRECT_BLOCK_CELLS // (heads * t))
    segments = np.empty((heads, t - first_row, len(cuts) - 1))
    sink = np.empty((heads, t - first_row, len(sinks)))

    def one(start: int) -> None:
        stop = min(start + step, t)
        first_key = 0 if window is None else max(0, start - window + 1)
        found = block_sums(queries, keys_reversed, slice(start, stop), first_key, cuts, record.softcap, window, sinks)
        segments[:, start - first_row: stop - first_row], sink[:, start - first_row: stop - first_row] = found

    list(pool.map(one, range(first_row, t, step)))
    return segments, sink
