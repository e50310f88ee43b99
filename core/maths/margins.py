"""Comparisons with a margin, for sentences written from numbers that differ by noise: a plateau (the run of
layers within a margin of the best) rather than its argmax, and the first layer from which one series leads the
others at every later layer rather than the first layer where it happens to lead once."""

from __future__ import annotations

import numpy as np


def plateau(values: np.ndarray, margin: float) -> tuple[int, int]:
    """``(first, last)``, inclusive: the consecutive indices around the best of ``values`` ``[n]`` (NaN ignored)
    whose values are within ``margin`` of the best."""
    values = np.asarray(values, dtype=float)
    best = int(np.nanargmax(values))
    near = values >= values[best] - margin  # NaN compares False: it ends a plateau
    first = last = best
    while first > 0 and near[first - 1]:
        first -= 1
    while last < len(values) - 1 and near[last + 1]:
        last += 1
    return first, last


def leads_from(leader: np.ndarray, others: np.ndarray, margin: float) -> int | None:
    """The first index from which ``leader`` ``[n]`` exceeds every row of ``others`` ``[k, n]`` (or ``[n]``) by more
    than ``margin`` at that index and at every later one; None when it does not at the last index (or ``k`` is 0)."""
    leader = np.asarray(leader, dtype=float)
    others = np.atleast_2d(np.asarray(others, dtype=float))
    if others.shape[0] == 0:
        return None
    ahead = leader > others.max(axis=0) + margin
    if not ahead[-1]:
        return None
    behind = np.flatnonzero(~ahead)
    return int(behind[-1]) + 1 if len(behind) else 0


def runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``(first, last)``, inclusive, of each run of consecutive True entries of ``mask`` ``[n]``, in order."""
    mask = np.asarray(mask, dtype=bool)
    edges = np.flatnonzero(np.diff(np.concatenate([[False], mask, [False]]).astype(int)))
    return [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2])]
