"""What one head of a long text does, in three numbers read from its weights: how much attention it puts on the
first token against spreading it evenly, how much it keeps near the query, and how far it reaches.

Pure numpy, computed a band of query rows at a time (``HeadReading.add``), so a long text's head is read in the
same pass that pools it (``core.attention_heads.long_attention.pooled_head``), never as a whole ``[T, T]``; a zoomed
region is read from its own cells (``region_reading``).

Definitions (each query counts once, whatever its number of keys):

- ``first``: the mean over queries of the weight on position 0; ``uniform_first``: the same for a head spreading
  each query's attention evenly over the keys it may see (``1 / keys seen``, a decoder's query ``q`` sees ``q + 1``,
  fewer through a sliding window).
- ``local``: the mean over queries of the weight on keys at most ``LOCAL_TOKENS`` positions from the query (the
  query itself included), on either side.
- ``reach``: the smallest distance ``d`` such that ``REACH_SHARE`` of all the attention (every query's weights
  together) lies on keys at most ``d`` positions from their query.

Example::

    reading = HeadReading(n=4974, causal=True, window=None)
    reading.add(weights, rows)           # weights [r, n] of queries ``rows``, for every band
    reading.first, reading.uniform_first, reading.local, reading.reach
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.maths.numbers import fixed, percent

LOCAL_TOKENS = 16
REACH_SHARE = 0.95
CHUNK_CELLS = 1 << 20  # cells read at a time (a few MB of float64 and int64 temporaries)


def keys_seen(rows: np.ndarray, n: int, *, causal: bool, window: int | None) -> np.ndarray:
    """int64 ``[r]``: how many keys each query of ``rows`` may attend to (``core.attention_heads.pooling.visible_blocks``'
    rule: a decoder's query sees keys at or before it; a sliding window, keys ``k > query - window``)."""
    rows = np.asarray(rows, dtype=np.int64)
    last = rows if causal else np.full_like(rows, n - 1)
    first = np.zeros_like(rows) if window is None else np.maximum(rows - window + 1, 0)
    return last - first + 1


class HeadReading:
    """The sums behind ``first``, ``local`` and ``reach``, added a band of query rows at a time."""

    def __init__(self, n: int, *, causal: bool, window: int | None):
        self.n, self.causal, self.window = n, causal, window
        self.queries = 0
        self._first = self._uniform = self._local = 0.0
        self._by_distance = np.zeros(n, dtype=np.float64)  # attention mass at each query-key distance

    def add(self, weights: np.ndarray, rows) -> None:
        """``weights`` ``[r, n]``: the weights of queries ``rows`` on every key (masked cells 0 or NaN); read
        ``CHUNK_CELLS`` cells at a time."""
        rows = np.asarray(rows, dtype=np.int64)
        every = max(1, CHUNK_CELLS // self.n)
        for a in range(0, len(rows), every):
            w = np.nan_to_num(np.asarray(weights[a : a + every], dtype=np.float64))
            part = rows[a : a + every]
            distance = np.abs(part[:, None] - np.arange(self.n)[None, :])
            self.queries += len(part)
            self._first += float(w[:, 0].sum())
            self._uniform += float((1.0 / keys_seen(part, self.n, causal=self.causal, window=self.window)).sum())
            self._local += float(w[distance <= LOCAL_TOKENS].sum())
            self._by_distance += np.bincount(distance.ravel(), weights=w.ravel(), minlength=self.n)

    @property
    def first(self) -> float:
        return self._first / self.queries

    @property
    def uniform_first(self) -> float:
        return self._uniform / self.queries

    @property
    def local(self) -> float:
        return self._local / self.queries

    @property
    def reach(self) -> int:
        cumulative = np.cumsum(self._by_distance)
        return int(np.searchsorted(cumulative, REACH_SHARE * cumulative[-1] * (1 - 1e-12)))

    def done(self) -> Reading:
        """The three numbers, frozen."""
        return Reading(self.queries, self.first, self.uniform_first, self.local, self.reach)


@dataclass(frozen=True)
class Reading:
    """One head's three numbers over ``queries`` queries (see the module's definitions)."""

    queries: int
    first: float
    uniform_first: float
    local: float
    reach: int

    def sentence(self, first_label: str) -> str:
        """In words, naming the first token by ``first_label`` (written by ``core.model.tokens.token_labels``, made
        safe for where it is shown by the caller)."""
        times = self.first / self.uniform_first if self.uniform_first > 0 else 0.0
        ratio = f" ({times:,.0f} times as much)" if times >= 2 else ""
        return (f"On average this head puts {percent(self.first, 0)} of a query's attention on the first token, "
                f"{first_label}, against {percent(self.uniform_first, 1)} if it spread it evenly over the keys the "
                f"query sees{ratio}; {percent(self.local, 0)} on keys at most {LOCAL_TOKENS} tokens from the query "
                f"(itself included); {percent(REACH_SHARE)} of all its attention lies within {self.reach:,} tokens "
                "of the query.")


@dataclass(frozen=True)
class RegionReading:
    """A zoomed region's numbers: the mean share of its queries' attention on its keys, and its strongest cell."""

    share: float
    strongest: float
    query: int  # position of the strongest cell's query, and of its key
    key: int


def region_reading(values: np.ndarray, hidden: np.ndarray, queries: range, keys: range) -> RegionReading:
    """``values`` ``[q, k]``: the weights of ``queries`` on ``keys`` (``hidden``: masked cells)."""
    w = np.where(hidden, 0.0, np.nan_to_num(np.asarray(values, dtype=np.float64)))
    i, j = np.unravel_index(int(np.argmax(w)), w.shape)
    return RegionReading(float(w.sum(axis=1).mean()), float(w[i, j]), queries.start + int(i), keys.start + int(j))


def weight(x: float) -> str:
    """An attention weight: two decimals, two significant digits below 0.01 (a weight of a query over 3,000 keys)."""
    return fixed(x, 2) if x >= 0.01 or x <= 0 else f"{x:.2g}"


def region_sentence(reading: RegionReading, queries: range, keys: range, query_label: str, key_label: str) -> str:
    """The zoom's sentence; ``query_label``/``key_label``: the strongest cell's tokens, made safe by the caller."""
    gap = reading.query - reading.key
    where = "itself" if gap == 0 else f"{gap:,} tokens back" if gap > 0 else f"{-gap:,} tokens ahead"
    return (f"Queries {queries.start:,}–{queries.stop - 1:,} put on average {percent(reading.share, 0)} of their "
            f"attention on keys {keys.start:,}–{keys.stop - 1:,} shown here (each query's weights sum to 1 over every "
            f"key it sees); the strongest weight here, {weight(reading.strongest)}, is from {query_label} "
            f"({reading.query:,}) to {key_label} ({reading.key:,}), {where}.")
