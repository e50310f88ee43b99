"""A long attention matrix brought down to screen pixels: each pixel the maximum, or the sum, of the cells it covers.

Pure numpy (``ufunc.reduceat`` along each axis, no loop over cells). A picture is pooled for the device pixels it is
drawn at (``pixels`` per side, its CSS size × the device pixel ratio), so the browser draws each of its pixels as one
of the screen's and resamples nothing: a one-token column (the attention sink at token 0) keeps its own pixel. Pixel
``j`` of ``pixels`` over ``n`` positions starts at the position under its left edge, ``floor(j · n / pixels)``, and
covers every position up to the next pixel's start: ``n / pixels`` positions on average (``floor`` or ``ceil`` of it);
with more pixels than positions, each position is drawn several pixels wide. Which blocks hold no cell the model
lets a query see (a decoder's future, keys further back than a sliding window) is worked out from the block bounds, never
from a ``[T, T]`` mask.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Pool = Literal["max", "sum"]
POOLS: dict[str, np.ufunc] = {"max": np.maximum, "sum": np.add}


def pixel_starts(n: int, pixels: int) -> np.ndarray:
    """int64 ``[pixels]``: the first position each of ``pixels`` pixels covers, ``floor(j · n / pixels)`` (repeated
    when there are more pixels than positions: a position drawn several pixels wide)."""
    if n < 1 or pixels < 1:
        raise ValueError(f"need at least one position and one pixel, got {n} and {pixels}")
    return np.arange(pixels, dtype=np.int64) * n // pixels


def block_ends(starts: np.ndarray, n: int) -> np.ndarray:
    """int64 ``[p]``: the last position each block starting at ``starts`` covers (blocks run up to ``n``; a start
    repeated by the next pixel is a block of that one position)."""
    starts = np.asarray(starts, dtype=np.int64)
    return np.maximum(np.append(starts[1:], n) - 1, starts)


def tokens_per_pixel(starts: np.ndarray, n: int) -> tuple[int, int]:
    """``(fewest, most)`` positions a pixel of ``starts`` covers."""
    sizes = block_ends(starts, n) - np.asarray(starts) + 1
    return int(sizes.min()), int(sizes.max())


def pool(matrix: np.ndarray, row_starts: np.ndarray, col_starts: np.ndarray, how: Pool) -> np.ndarray:
    """float32 ``[..., len(row_starts), len(col_starts)]``: ``matrix`` ``[..., R, C]`` reduced over the blocks that
    start at ``row_starts`` (rows) and ``col_starts`` (columns), by ``how`` (``"max"`` or ``"sum"``); a start
    repeated by the next one is that one row or column (``reduceat``'s rule)."""
    ufunc = POOLS[how]
    rows = ufunc.reduceat(np.asarray(matrix, dtype=np.float32), np.asarray(row_starts, dtype=np.int64), axis=-2)
    return ufunc.reduceat(rows, np.asarray(col_starts, dtype=np.int64), axis=-1)


def visible_blocks(row_first: np.ndarray, row_last: np.ndarray, col_first: np.ndarray, col_last: np.ndarray, *,
                   causal: bool, window: int | None = None) -> np.ndarray:
    """bool ``[rows, cols]``: True where the block of queries ``row_first[i]..row_last[i]`` and keys
    ``col_first[j]..col_last[j]`` (positions in the text, inclusive) holds a cell the model lets a query see.

    ``causal``: a query sees keys at or before it. ``window``: it sees only keys ``k`` with ``query - window < k``
    (a sliding window, as ``Analysis.sliding_windows`` gives it). A block with no such cell is masked, not a 0.
    """
    rf, rl = np.asarray(row_first)[:, None], np.asarray(row_last)[:, None]
    cf, cl = np.asarray(col_first)[None, :], np.asarray(col_last)[None, :]
    seen = np.ones((rf.shape[0], cf.shape[1]), dtype=bool)
    if causal:
        seen &= cf <= rl
    if window is not None:
        seen &= cl > rf - window
    return seen


def sampled_rows(n: int, pixels: int) -> np.ndarray:
    """int64 ``[pixels]``: one query per pixel row for a thumbnail, the last of each block of ``pixel_starts`` (it
    sees the most keys in a decoder)."""
    return block_ends(pixel_starts(n, pixels), n)


def region_around(keys: tuple[float, float], queries: tuple[float, float], n: int, sides: list[int]) -> tuple[int, int, int]:
    """``(first query, first key, side)``: the square region of the smallest side in ``sides`` (the largest when
    none) that covers the box ``keys`` × ``queries`` (its bounds in positions, either order), centred on it and
    moved inside the ``n`` tokens."""
    ka, kb = sorted(keys)
    qa, qb = sorted(queries)
    extent = max(kb - ka, qb - qa)
    side = min(next((s for s in sorted(sides) if s >= extent), max(sides)), n)

    def first(a: float, b: float) -> int:
        return int(min(max(round((a + b) / 2 - side / 2 + 0.5), 0), n - side))

    return first(qa, qb), first(ka, kb), side
