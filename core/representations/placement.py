"""Where does my sentence land? One new occurrence of a word among sense-labelled occurrences.

The new occurrence is compared with the labelled ones in the full embedding space (cosine), layer
by layer: its ``k`` nearest labelled occurrences vote for a sense. Drawing it on a 2-D map uses
``core.maths.projection.fit_projection``'s ``transform`` (the same map, never a refit).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import pandas as pd

from core.maths.similarity import cosine

DEFAULT_K = 3
NEIGHBOUR_COLUMNS = ["layer", "rank", "occurrence", "label", "cosine"]
VOTE_COLUMNS = ["layer", "sense", "votes", "k", "mean_cosine", "tally"]


def nearest_occurrences(vectors: np.ndarray, labels: Sequence[str], query: np.ndarray, k: int = DEFAULT_K) -> pd.DataFrame:
    """The ``k`` labelled occurrences most similar (cosine) to ``query``, at every layer.

    ``vectors``: ``[layers + 1, N, hidden]`` (``core.representations.senses.Occurrences.vectors``), ``labels``: one per
    occurrence ("" = unlabelled, never a neighbour), ``query``: ``[layers + 1, hidden]``. One row per
    (layer, rank): ``layer``, ``rank`` (1 = most similar), ``occurrence`` (index into the N),
    ``label`` and ``cosine``. Fewer than ``k`` rows per layer when fewer occurrences are labelled.
    """
    vectors = np.asarray(vectors)
    query = np.asarray(query)
    if vectors.ndim != 3 or vectors.shape[1] != len(labels):
        raise ValueError(f"vectors must be [layers + 1, {len(labels)}, hidden], got {vectors.shape}")
    if query.shape != (vectors.shape[0], vectors.shape[2]):
        raise ValueError(f"query must be [layers + 1, hidden] = {(vectors.shape[0], vectors.shape[2])}, got {query.shape}")
    labelled = np.array([i for i, label in enumerate(labels) if label])
    rows = []
    if len(labelled) and k > 0:
        similarity = cosine(vectors[:, labelled], query[:, None, :])  # [layers + 1, labelled]
        for layer in range(vectors.shape[0]):
            order = np.argsort(-similarity[layer], kind="stable")[:k]
            for rank, j in enumerate(order, start=1):
                rows.append((layer, rank, int(labelled[j]), labels[labelled[j]], float(similarity[layer, j])))
    return pd.DataFrame(rows, columns=NEIGHBOUR_COLUMNS)


def sense_votes(neighbours: pd.DataFrame) -> pd.DataFrame:
    """One row per layer of ``nearest_occurrences``: the ``sense`` most of the neighbours have.

    A tie goes to the tied sense with the higher summed cosine. ``votes`` of ``k`` neighbours voted for
    it, ``mean_cosine`` is their mean similarity, ``tally`` spells out every sense's votes ("river 4, money 1").
    """
    rows = []
    for layer, group in neighbours.groupby("layer", sort=True):
        counts = Counter(group["label"])
        strength = group.groupby("label")["cosine"].sum()
        sense = max(counts, key=lambda label: (counts[label], strength[label]))
        chosen = group[group["label"] == sense]
        tally = ", ".join(f"{label} {n}" for label, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])))
        rows.append((int(layer), sense, counts[sense], len(group), float(chosen["cosine"].mean()), tally))
    return pd.DataFrame(rows, columns=VOTE_COLUMNS)


def first_settled_layer(votes: pd.DataFrame, sense: str) -> int | None:
    """The first layer from which every later layer votes for ``sense`` (None if the last layer does not)."""
    settled = None
    for layer, vote in zip(votes["layer"], votes["sense"], strict=True):
        if vote == sense:
            settled = layer if settled is None else settled
        else:
            settled = None
    return None if settled is None else int(settled)
