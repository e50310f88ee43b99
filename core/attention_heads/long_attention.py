"""One head of a long text at screen resolution, its zoomed region, and every head as a thumbnail: computed one head
(or a few query rows) at a time, never every head's ``[T, T]`` at once.

Shapes: ``T`` tokens; ``r``/``c`` pixel rows/columns (``core.attention_heads.pooling``). Masked blocks and cells (a decoder's future,
keys further back than a layer's sliding window) are NaN in ``values`` and True in ``hidden``: drawn as masked, never
as a weight of 0.

Example::

    head = pooled_head(model, analysis, layer=3, head=5, pixels=1120)["max"]
    head.values.shape                     # (1120, 1120): each pixel the maximum of the cells it covers
    head.reading.sentence("<bos>")        # its share on the first token, near the query, its reach
    zoomed = zoom(model, analysis, 3, 5, range(1000, 1064), range(0, 64))
    zoomed.values                         # exactly the model's weights of those queries and keys
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.attention_heads.attention import head_attention
from core.attention_heads.head_parts import records
from core.attention_heads.head_reading import HeadReading, Reading
from core.attention_heads.pooling import POOLS, Pool, block_ends, pixel_starts, pool, sampled_rows, tokens_per_pixel, visible_blocks
from core.model.analysis import Analysis
from core.model.attention_layers import SINGLE_STACK
from core.model.models import LoadedModel
from core.model.on_demand import BLOCK_CELLS, release_freed_memory
from core.model.tokens import token_labels
from core.model.trace_layers import attention_weights

BAND_CELLS = BLOCK_CELLS  # a pooled head computed on demand: this many of its cells at a time (16 MB of float32)


def head_weights(model: LoadedModel, analysis: Analysis, layer: int, head: int) -> np.ndarray:
    """float32 ``[T, T]``: head ``head`` of layer ``layer``, exactly the model's own weights (rows = queries)."""
    if analysis.attentions is not None:
        return analysis.attentions[layer, head]
    return head_attention(model, analysis, layer, head)


def row_weights(model: LoadedModel, analysis: Analysis, layer: int, heads: list[int], rows: list[int]) -> np.ndarray:
    """float32 ``[len(heads), len(rows), T]``: only the query rows ``rows`` of ``heads``, computed from the layer's
    queries and keys when the analysis does not hold every head's weights (its trace, ``Analysis.trace``, else
    ``core.model.trace_layers.attention_weights`` of a recorded pass)."""
    if analysis.attentions is not None:
        return np.asarray(analysis.attentions[layer][heads][:, rows], dtype=np.float32)
    if analysis.trace is not None:  # the analysis's own pass: one layer's queries and keys, no second pass
        return analysis.trace.attention(SINGLE_STACK, layer, heads, list(rows))
    return attention_weights(records(model, analysis)[layer], heads, list(rows))


def window_of(analysis: Analysis, layer: int) -> int | None:
    """The sliding window layer ``layer`` attends through, or None."""
    windows = analysis.sliding_windows
    return None if windows is None else windows[layer]


@dataclass(frozen=True, eq=False)
class PooledHead:
    """One head at the device pixels it is drawn at: ``values`` float32 ``[r, c]``, each pixel the ``how`` (max or
    sum) of the cells of queries ``row_starts[i]..`` and keys ``col_starts[j]..`` (``core.attention_heads.pooling``;
    NaN: no visible cell); ``reading``: the head's numbers read from all its weights (``head_reading``)."""

    values: np.ndarray
    row_starts: np.ndarray
    col_starts: np.ndarray
    num_tokens: int
    how: str
    reading: Reading

    @property
    def per_pixel(self) -> tuple[int, int]:
        """``(fewest, most)`` positions a pixel covers along each side."""
        return tokens_per_pixel(self.col_starts, self.num_tokens)


def pooled_head(model: LoadedModel, analysis: Analysis, layer: int, head: int, pixels: int,
                hows: tuple[Pool, ...] = ("max", "sum")) -> dict[str, PooledHead]:
    """Head ``head`` of layer ``layer`` pooled to exactly ``pixels`` per side (the device pixels it is drawn at), once
    per way in ``hows``, and read (``head_reading``): one computation of its weights for all of them. Computed on
    demand (a long analysis), the weights are computed, pooled and read a band of pixel rows at a time (about
    ``BAND_CELLS`` cells), never the head's whole ``[T, T]``."""
    n = analysis.num_tokens
    starts = pixel_starts(n, pixels)
    ends = block_ends(starts, n)
    window = window_of(analysis, layer)
    seen = visible_blocks(starts, ends, starts, ends, causal=analysis.is_decoder, window=window)
    reading = HeadReading(n, causal=analysis.is_decoder, window=window)
    if analysis.attentions is not None or analysis.trace is None:
        weights = head_weights(model, analysis, layer, head)
        pooled = {how: pool(weights, starts, starts, how) for how in hows}
        reading.add(weights, np.arange(n))
    else:
        pooled = {how: np.empty((len(starts), len(starts)), dtype=np.float32) for how in hows}
        step = int((ends - starts).max()) + 1  # positions per pixel, at most
        band = max(1, BAND_CELLS // (n * step))  # pixel rows per band
        for first in range(0, len(starts), band):
            last = min(first + band, len(starts)) - 1
            rows = range(int(starts[first]), int(ends[last]) + 1)
            weights = row_weights(model, analysis, layer, [head], list(rows))[0]  # [rows, T]
            for how in hows:
                pooled[how][first : last + 1] = pool(weights, starts[first : last + 1] - rows.start, starts, how)
            # the rows a repeated start shares with the band before (more pixels than positions) are read once
            fresh = rows.start if first == 0 else max(rows.start, int(ends[first - 1]) + 1)
            reading.add(weights[fresh - rows.start :], np.arange(fresh, rows.stop))
        release_freed_memory()  # the bands' freed temporaries, which glibc would keep resident
    done = reading.done()
    out = {}
    for how, values in pooled.items():
        values[~seen] = np.nan
        values.setflags(write=False)
        out[how] = PooledHead(values, starts, starts, n, how, done)
    return out


@dataclass(frozen=True, eq=False)
class Zoom:
    """A region of one head, every cell its own: ``values`` float32 ``[q, k]`` exactly the model's weights of queries
    ``queries`` and keys ``keys``; ``hidden`` bool ``[q, k]`` the cells the model masks; each position's label."""

    values: np.ndarray
    hidden: np.ndarray
    queries: range
    keys: range
    query_labels: list[str]
    key_labels: list[str]


def zoom(model: LoadedModel, analysis: Analysis, layer: int, head: int, queries: range, keys: range,
         labels: list[str] | None = None) -> Zoom:
    """The cells of ``queries`` × ``keys`` (ranges of positions inside the text) of one head, computing only those
    query rows. ``labels``: ``core.model.tokens.token_labels(analysis)``, if the caller has them already."""
    n = analysis.num_tokens
    if not (0 <= queries.start < queries.stop <= n and 0 <= keys.start < keys.stop <= n):
        raise ValueError(f"a region inside the {n} tokens, got queries {queries} and keys {keys}")
    rows = row_weights(model, analysis, layer, [head], list(queries))[0]
    values = np.ascontiguousarray(rows[:, keys.start : keys.stop], dtype=np.float32)
    q, k = np.arange(queries.start, queries.stop), np.arange(keys.start, keys.stop)
    hidden = ~visible_blocks(q, q, k, k, causal=analysis.is_decoder, window=window_of(analysis, layer))
    labels = token_labels(analysis) if labels is None else labels
    return Zoom(values, hidden, queries, keys, labels[queries.start : queries.stop], labels[keys.start : keys.stop])


@dataclass(frozen=True, eq=False)
class Thumbnails:
    """Every head of ``layers`` as a small picture: ``values`` float32 ``[len(layers), heads, r, c]``. Row ``i`` of a
    thumbnail is query ``rows[i]`` alone (one query per block of rows: the last), each pixel the ``how`` of its
    weights on the keys ``col_starts[j]..`` (NaN: none visible)."""

    values: np.ndarray
    layers: tuple[int, ...]
    rows: np.ndarray
    col_starts: np.ndarray
    num_tokens: int
    how: str


def thumbnails(model: LoadedModel, analysis: Analysis, layers: tuple[int, ...], how: Pool, pixels: int,
               progress=None) -> Thumbnails:
    """Every head of each layer in ``layers`` at ``pixels`` per side (the device pixels a thumbnail is drawn at), from
    one sampled query per pixel row (``core.attention_heads.pooling.sampled_rows``): ``pixels / T`` of the work of
    their whole matrices. ``progress(done, total)`` after each layer."""
    if how not in POOLS:
        raise ValueError(f"unknown pooling {how!r}")
    n = analysis.num_tokens
    rows = sampled_rows(n, pixels)
    starts = pixel_starts(n, pixels)
    heads = list(range(model.num_heads))
    out = np.empty((len(layers), len(heads), len(rows), len(starts)), dtype=np.float32)
    one_per_row = np.arange(len(rows))
    for i, layer in enumerate(layers):
        weights = row_weights(model, analysis, layer, heads, rows.tolist())  # [heads, r, T]
        values = pool(weights, one_per_row, starts, how)
        seen = visible_blocks(rows, rows, starts, block_ends(starts, n), causal=analysis.is_decoder,
                              window=window_of(analysis, layer))
        values[:, ~seen] = np.nan
        out[i] = values
        if progress is not None:
            progress(i + 1, len(layers))
    out.setflags(write=False)
    return Thumbnails(out, tuple(layers), rows, starts, n, how)
