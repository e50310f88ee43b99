"""The numbers an attention figure draws (``viz.attention``), as the tables its CSV download holds: one head at full
precision, or a grid's or overview's block averages. Masked cells (a decoder's later tokens, a sliding window's older
ones) are empty, never 0."""

from __future__ import annotations

import numpy as np
import pandas as pd

from core.model.tokens import unique_labels
from viz.attention_cells import bin_labels, block_mean_2d, masked_upper


def matrix_table(matrix: np.ndarray, labels: list[str], *, causal: bool, key_labels: list[str] | None = None,
                 hidden: np.ndarray | None = None) -> pd.DataFrame:
    """``[n, n]`` (or ``[t, s]`` with ``key_labels``) at full precision as a wide table: a ``query`` column,
    then one column per key (labels made unique); masked cells of a decoder (and ``hidden`` ones) are empty."""
    names = unique_labels(labels)
    key_names = names if key_labels is None else unique_labels(key_labels)
    table = pd.DataFrame(masked_upper(matrix, causal, hidden).astype(np.float64), columns=key_names)
    table.insert(0, "query", names)
    return table


def cells_table(
    matrices: np.ndarray,
    labels: list[str],
    *,
    causal: bool,
    max_cells: int,
    outer: dict[str, list],
    key_labels: list[str] | None = None,
    hidden: np.ndarray | None = None,
) -> pd.DataFrame:
    """The numbers a grid or overview draws: ``[*outer, n, n]`` block-averaged to ``max_cells``, as one wide table.

    ``outer`` names the leading axes in order, e.g. ``{"layer": [...], "head": [...]}``; each
    row is one query (or block of queries) of one matrix; masked cells (and ``hidden`` ones) are empty.
    """
    small, row_bins, bins = block_mean_2d(masked_upper(matrices, causal, hidden), max_cells)
    names = bin_labels(labels, row_bins)
    key_names = bin_labels(labels if key_labels is None else key_labels, bins)
    c, r = len(key_names), len(names)
    flat = small.reshape(-1, c)
    table = pd.DataFrame(np.round(flat.astype(np.float64), 6), columns=key_names)
    table.insert(0, "query", names * (len(flat) // r))
    index = np.indices(small.shape[:-2]).reshape(len(outer), -1)  # [axes, matrices]
    for position, (column, values) in enumerate(reversed(list(outer.items()))):
        axis = len(outer) - 1 - position
        table.insert(0, column, np.repeat(np.asarray(values, dtype=object)[index[axis]], r))
    return table
