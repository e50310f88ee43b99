"""The logit lens for every position, summarised: where the model's final prediction first comes out on top.

Computed from ``core.outputs.lens.Lens``'s public outputs (``final_ranks`` ``[layers + 1, T]``: the rank, 0 = top, at each
hidden state of the token the last layer puts first).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class LensSummary:
    """``first_top``: int ``[T]``, the first hidden state at which the final prediction is top-1; ``settled``:
    ``[T]``, the hidden state from which it stays top-1 to the end (at most the last one, where it is by
    definition)."""

    first_top: np.ndarray
    settled: np.ndarray


def lens_summary(final_ranks: np.ndarray) -> LensSummary:
    """``LensSummary`` of ``final_ranks`` ``[layers + 1, T]``."""
    top = np.asarray(final_ranks) == 0
    rows = top.shape[0]
    first = np.argmax(top, axis=0)
    not_top_after = np.where(~top, np.arange(rows)[:, None], -1).max(axis=0)  # last hidden state where it is not top
    return LensSummary(first.astype(np.int64), (not_top_after + 1).astype(np.int64))
