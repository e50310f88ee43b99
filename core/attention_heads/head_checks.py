"""What the Inside one head page reads off a head taken apart (``core.attention_heads.inside_head.HeadComputation``,
of any stack): the facts its sentences state, the check against
the model's own attention, and the tables its figures download. Computed here from the numbers, so the page only
draws them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

REPRODUCED_WITHIN = 1e-5  # the largest difference from the model's own weights still called a reproduction


@dataclass(frozen=True)
class HeadFacts:
    """``head_size``: d, the numbers per query; ``rotated_components``: how many of the last token's query components
    the rotary embedding changed (None without one); ``standard_scale``: the scores are scaled by 1/√d;
    ``position_bias``: a learned relative-position bias is added (T5); ``sliding``: the mask hides keys that a causal
    mask alone would show (a sliding window; False for a mask that is not square)."""

    head_size: int
    rotated_components: int | None
    standard_scale: bool
    position_bias: bool
    sliding: bool


def head_facts(step) -> HeadFacts:
    """``HeadFacts`` of one head's computation."""
    d = step.queries.shape[1]
    before = getattr(step, "queries_before_rotary", None)
    rotated = None if before is None else int(np.sum(~np.isclose(before[-1], step.queries[-1])))
    bias = getattr(step, "bias", None)
    keep = step.keep_mask
    square = keep.shape[0] == keep.shape[1]
    return HeadFacts(d, rotated, bool(np.isclose(step.scale, d**-0.5)), bias is not None and bool(np.any(bias)),
                     square and not keep[np.tril_indices(keep.shape[0])].all())


def largest_difference(step, own: np.ndarray) -> float:
    """The largest absolute difference between the recomputed weights and the model's own ``own`` ``[T, S]``."""
    return float(np.abs(step.weights - own).max())


def first_word(special_mask: np.ndarray) -> int:
    """The first token that is not special (0 when every one is): the query the page opens at."""
    return next((i for i in range(len(special_mask)) if not special_mask[i]), 0)


def masked_scores(step) -> np.ndarray:
    """The scaled scores ``[T, S]`` with NaN where the mask hides a key (drawn blank: −∞ before the softmax)."""
    return np.where(step.keep_mask, step.scaled, np.nan)


def per_token_table(matrix: np.ndarray, key_labels: list[str], prefix: str) -> pd.DataFrame:
    """One row per key token of ``matrix`` ``[S, d]`` (keys or values): position, token, then ``{prefix}{c}``."""
    return pd.DataFrame({"position": range(len(key_labels)), "token": key_labels}
                        | {f"{prefix}{c}": matrix[:, c] for c in range(matrix.shape[1])})


def scores_table(step, query: int, key_labels: list[str]) -> pd.DataFrame:
    """From scores to weights for one query, one row per key: q·k, the position bias where there is one, the
    scaled score, the weight and whether the key is visible."""
    bias = getattr(step, "bias", None)
    return pd.DataFrame({"position": range(len(key_labels)), "key token": key_labels, "q·k": step.scores[query]}
                        | ({"position bias": bias[query]} if bias is not None and np.any(bias) else {})
                        | {"scaled": step.scaled[query], "weight": step.weights[query], "visible": step.keep_mask[query]})


def weights_table(step, labels: list[str], key_labels: list[str], own: np.ndarray) -> pd.DataFrame:
    """Every (query, key) cell: the recomputed weight, the model's own, the scaled score and whether it is visible."""
    return pd.DataFrame({"query": np.repeat(labels, len(key_labels)), "key": key_labels * len(labels),
                         "recomputed": step.weights.ravel(), "model": own.ravel(), "scaled": step.scaled.ravel(),
                         "visible": step.keep_mask.ravel()})
