"""Chance level and bootstrap interval of the separation scores, and the built-in sense sets'
balance: a sense must not be recognisable from the word's token position alone."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from core.representations.senses import (
    builtin_set,
    builtin_words,
    knn_chance_level,
    occurrence_embeddings,
    separation,
    separation_interval,
    token_positions,
)
from viz.senses import separation_figure


def test_chance_level_is_the_share_of_other_points_with_the_same_label():
    # a a b b: every point has 1 same-label point among 3 others.
    assert knn_chance_level(["a", "a", "b", "b"]) == pytest.approx(1 / 3)
    # 12 + 12: 11 of 23 others share the label.
    assert knn_chance_level(["x"] * 12 + ["y"] * 12) == pytest.approx(11 / 23)
    # Single-occurrence and unlabelled points are not measured, as in ``separation``.
    assert knn_chance_level(["a", "a", "b", "b", "c", ""]) == pytest.approx(1 / 3)
    assert np.isnan(knn_chance_level(["a", "a", "b"]))


def test_chance_level_matches_shuffled_labels():
    rng = np.random.default_rng(1)
    labels = np.array(["a"] * 10 + ["b"] * 5 + ["c"] * 3)
    x = rng.normal(size=(1, len(labels), 8))
    scores = [separation(x, list(rng.permutation(labels)))["knn_accuracy"].iloc[0] for _ in range(400)]
    assert np.mean(scores) == pytest.approx(knn_chance_level(list(labels)), abs=0.03)


def test_interval_shares_credit_among_identical_points():
    # Four identical points, two per label: each nearest-neighbour set is the three others, one with the same label.
    vectors = np.ones((1, 4, 3))
    table = separation_interval(vectors, ["a", "a", "b", "b"], resamples=50)
    assert table.loc[0, "knn_low"] == pytest.approx(1 / 3) and table.loc[0, "knn_high"] == pytest.approx(1 / 3)


def test_interval_brackets_the_score_and_narrows_with_more_points():
    rng = np.random.default_rng(0)

    def width(n):
        labels = ["a"] * n + ["b"] * n
        x = rng.normal(size=(1, 2 * n, 16)) + np.repeat([[0.0], [0.6]], n, axis=0)[None]
        interval = separation_interval(x, labels, resamples=400)
        score = separation(x, labels).iloc[0]
        assert interval.loc[0, "silhouette_low"] <= score["silhouette"] <= interval.loc[0, "silhouette_high"]
        assert interval.loc[0, "knn_low"] <= interval.loc[0, "knn_high"]
        return interval.loc[0, "knn_high"] - interval.loc[0, "knn_low"]

    assert width(200) < width(8)


def test_interval_is_nan_without_two_measured_labels():
    table = separation_interval(np.zeros((2, 3, 4)), ["a", "a", "b"])
    assert table[["knn_low", "knn_high"]].isna().all().all() and list(table["layer"]) == [0, 1]


def test_separation_figure_draws_chance_zero_and_interval():
    table = separation(np.random.default_rng(0).normal(size=(3, 6, 4)), ["a"] * 3 + ["b"] * 3)
    interval = separation_interval(np.random.default_rng(0).normal(size=(3, 6, 4)), ["a"] * 3 + ["b"] * 3)
    fig = separation_figure(table, 1, chance=0.4, interval=interval)
    # Reference levels are flat legend lines across every layer (a label on the plot could cover a data point).
    levels = {trace.name: set(trace.y) for trace in fig.data if trace.mode == "lines" and len(set(trace.y)) == 1}
    assert levels == {"silhouette 0: no structure": {0.0}, "1-NN chance (0.40)": {0.4}}
    flat = [trace for trace in fig.data if trace.name in levels]
    assert all(list(trace.x) == [table["layer"].min(), table["layer"].max()] for trace in flat)
    assert not fig.layout.annotations, "a label written on the plot can sit on a data point"
    assert sum(trace.fill == "toself" for trace in fig.data) == 2


@pytest.mark.integration
@pytest.mark.parametrize("word", builtin_words())
def test_builtin_sets_balance_position_and_sit_near_chance_at_layer_0(bundled, word):
    sentences, senses = builtin_set(word)
    by_sense = {
        sense: Counter(token_positions(bundled, [s for s, t in zip(sentences, senses) if t == sense], word))
        for sense in set(senses)
    }
    assert all(sum(c.values()) >= 12 for c in by_sense.values())
    # The same multiset of token positions in every sense: position alone cannot tell them apart.
    assert len({tuple(sorted(c.items())) for c in by_sense.values()}) == 1, by_sense
    occ = occurrence_embeddings(bundled, sentences, word)
    labels = [senses[i] for i in occ.sentence_ids]
    table = separation(occ.vectors, labels)
    chance = knn_chance_level(labels)
    assert abs(table.loc[0, "knn_accuracy"] - chance) <= 0.1
    assert table.loc[0, "silhouette"] <= 0.05
    # The lesson: context separates the senses well above chance in some later layer.
    assert table["knn_accuracy"].iloc[1:].max() >= chance + 0.2
