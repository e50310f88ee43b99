"""How faithful and how ordered a query-key map is (``core.attention_heads.qk_map``), and the sentences that say so.

``nearest_key_agreement``: how often a query's nearest key on the map is the key it attends to most (the picture's own
faithfulness figure); ``position_order``: how much a map is ordered by position; sentences written from those numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.attention_heads.qk_map import QueryKeyMap
from core.maths.numbers import percent

NEIGHBOURS_FOR_ORDER = 5


@dataclass(frozen=True)
class Agreement:
    """How often a query's nearest key is the key it attends to most, over ``count`` queries with two keys or
    more to choose from: ``on_map`` (2-D distance on the map), ``in_space`` (distance between the normalised
    d-dimensional vectors), and ``chance`` (the mean of 1 / keys to choose from: a key picked at random)."""

    on_map: float
    in_space: float
    chance: float
    count: int


def nearest_key_agreement(qmap: QueryKeyMap) -> Agreement:
    """The faithfulness figure of a map: see ``Agreement``. Ties go to the lowest key index."""
    n = qmap.num_tokens
    q_xy, k_xy = qmap.coords[:n].astype(np.float64), qmap.coords[n:].astype(np.float64)
    hits_map = hits_space = 0
    chance = 0.0
    count = 0
    for query in range(n):
        keys, weights = qmap.attention(query)
        if len(keys) < 2:
            continue
        top = keys[int(np.argmax(weights))]
        near_map = keys[int(np.argmin(((k_xy[keys] - q_xy[query]) ** 2).sum(axis=1)))]
        diff = qmap.keys[keys].astype(np.float64) - qmap.queries[query].astype(np.float64)
        near_space = keys[int(np.argmin((diff ** 2).sum(axis=1)))]
        hits_map += near_map == top
        hits_space += near_space == top
        chance += 1.0 / len(keys)
        count += 1
    if count == 0:
        return Agreement(float("nan"), float("nan"), float("nan"), 0)
    return Agreement(hits_map / count, hits_space / count, chance / count, count)


def position_order(coords: np.ndarray, position: np.ndarray, neighbours: int = NEIGHBOURS_FOR_ORDER) -> float:
    """How ordered by position a map is: the Spearman correlation between each point's position and the mean
    position of its ``neighbours`` nearest other points on the map (``coords`` ``[M, 2]``, ``position`` ``[M]``).
    1 = neighbours on the map sit at the same place in their texts; 0 = position says nothing about the map."""
    from scipy.stats import spearmanr  # noqa: PLC0415 - SciPy's import cost, only when asked
    from sklearn.neighbors import NearestNeighbors  # noqa: PLC0415 - scikit-learn's import cost, only when asked

    m = coords.shape[0]
    k = min(neighbours, m - 1)
    if k < 1 or np.ptp(position) == 0:
        return float("nan")
    _, index = NearestNeighbors(n_neighbors=k + 1).fit(coords).kneighbors(coords)
    around = np.asarray(position, dtype=np.float64)[index[:, 1:]].mean(axis=1)
    rho = spearmanr(position, around).statistic
    return float(rho) if np.isfinite(rho) else float("nan")


def _compared(value: float, reference: float, count: int) -> int:
    """+1 / 0 / −1: ``value`` above, within or below ``reference`` ± two binomial standard errors over ``count``."""
    margin = 2 * np.sqrt(max(reference * (1 - reference), 1e-12) / max(count, 1))
    return 1 if value > reference + margin else -1 if value < reference - margin else 0


def agreement_sentence(agreement: Agreement, method_name: str, head_size: int, first_key_share: float) -> str:
    """What the faithfulness figures say, from the numbers: how often the nearest key on the map (and in the
    normalised ``head_size``-dimensional space) is the key attended to most, against a key picked at random.
    ``first_key_share``: of those queries, the share whose top key is their text's first token."""
    if agreement.count == 0:
        return "No query here has two keys or more to choose from, so there is no nearest key to compare."
    verdicts = {1: "more often than", 0: "about as often as", -1: "less often than"}
    verdict = verdicts[_compared(agreement.on_map, agreement.chance, agreement.count)]
    space = _compared(agreement.in_space, agreement.chance, agreement.count)
    # the full space is credited with what the picture loses only where it beats chance itself (issue 50, item 3)
    loses = (space > 0 and agreement.in_space > 2 * agreement.on_map
             and _compared(agreement.on_map, agreement.in_space, agreement.count) < 0)
    sentence = (
        f"For {percent(agreement.on_map)} of the {agreement.count:,} queries with two keys or more to choose from, the "
        f"nearest key of their own text on this {method_name} map is the key they attend to most: {verdict} a key "
        f"picked at random ({percent(agreement.chance)}). In the head's own {head_size}-dimensional space, after the "
        f"normalisation, the nearest key is that key for {percent(agreement.in_space)}"
        + (", so the 2-D picture loses most of what distance shows there." if loses
           else "." if space > 0 else
           f", {verdicts[space]} a key picked at random, too: distance there does not pick out the key this head "
           "attends to most either.")
    )
    if first_key_share >= 0.5:
        sentence += (f" For {percent(first_key_share)} of these queries the key attended to most is their text's first "
                     "token (an attention sink): a map can put a query next to that key only if it sits apart from "
                     "the rest of its text.")
    return sentence


def first_key_share(qmap: QueryKeyMap) -> float:
    """Of the queries with two keys or more to choose from, the share whose top key is their text's first token."""
    hits = total = 0
    for query in range(qmap.num_tokens):
        keys, weights = qmap.attention(query)
        if len(keys) < 2:
            continue
        total += 1
        hits += qmap.position[keys[int(np.argmax(weights))]] == 0
    return hits / total if total else float("nan")


def order_sentence(orders: list[tuple[int, int, float]], shown: int = 3) -> str:
    """The heads whose maps are most and least ordered by position, from ``(layer, head, order)`` triples."""
    ranked = sorted(((o, layer, head) for layer, head, o in orders if np.isfinite(o)), reverse=True)
    if not ranked:
        return "No map here has tokens at more than one position, so none is ordered by position."
    top = ", ".join(f"{layer}.{head} (ρ = {o:.2f})" for o, layer, head in ranked[:shown])
    if len(ranked) <= 2 * shown:
        every = ", ".join(f"{layer}.{head} (ρ = {o:.2f})" for o, layer, head in ranked)
        return f"Maps ordered by position, most first: {every}."
    low = ", ".join(f"{layer}.{head} (ρ = {o:.2f})" for o, layer, head in ranked[::-1][:shown])
    return f"Most ordered by position: {top}; least: {low}."


def rotary_sentence(after: float, before: float) -> str:
    """How the rotary embedding changes the map's order by position (``position_order`` after and before it)."""
    if not (np.isfinite(after) and np.isfinite(before)):
        return ""
    change = ("orders it more by position" if after > before + 0.05 else
              "orders it less by position" if after < before - 0.05 else "changes its order by position little")
    return (f"On this head the map after the rotary embedding is ordered by position at ρ = {after:.2f}, before it at "
            f"ρ = {before:.2f}: the rotation {change}.")


@dataclass(frozen=True)
class QueryReading:
    """What a map says about one query: ``keys``, ``weights``: the keys it attends to most (corpus indices, the
    largest weight first, ties by index) and their weights; ``nearest``: its nearest key of its own text on the
    map, and ``nearest_weight`` the weight it gives that key."""

    keys: np.ndarray
    weights: np.ndarray
    nearest: int
    nearest_weight: float


def query_reading(qmap: QueryKeyMap, query: int, top: int = 5) -> QueryReading:
    """``QueryReading`` of ``query`` on ``qmap``, with its ``top`` most-attended keys."""
    keys, weights = qmap.attention(query)
    order = np.argsort(-weights, kind="stable")[:top]
    n = qmap.num_tokens
    nearest = int(np.argmin(((qmap.coords[n + keys] - qmap.coords[query]) ** 2).sum(axis=1)))
    return QueryReading(keys[order], weights[order], int(keys[nearest]), float(weights[nearest]))


def rotary_orders(rotated: QueryKeyMap, unrotated: QueryKeyMap) -> tuple[float, float]:
    """``position_order`` of a head's map after the rotary embedding and before it (the same corpus and head)."""
    positions = np.concatenate([rotated.position, rotated.position])
    return position_order(rotated.coords, positions), position_order(unrotated.coords, positions)


def map_points(qmap: QueryKeyMap) -> pd.DataFrame:
    """The map's points as a table: the N queries, then the N keys (``kind``, corpus ``index``, ``document``
    counted from 1, ``position``, ``token``, ``x``, ``y``)."""
    n = qmap.num_tokens
    return pd.DataFrame({
        "kind": ["query"] * n + ["key"] * n, "index": [*range(n), *range(n)],
        "document": np.concatenate([qmap.text_index, qmap.text_index]) + 1,
        "position": np.concatenate([qmap.position, qmap.position]), "token": [*qmap.tokens, *qmap.tokens],
        "x": qmap.coords[:, 0], "y": qmap.coords[:, 1],
    })
