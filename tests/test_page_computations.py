"""What the thin pages (issue 49 item 4) used to compute themselves, now in core: each function checked against the
numbers worked out by hand or by a library called directly here."""

from __future__ import annotations

import math
import statistics
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from core.attention_heads.attention import layer_panels
from core.attention_heads.head_checks import first_word, head_facts, largest_difference, masked_scores, per_token_table, scores_table, weights_table
from core.attention_heads.qk_map_quality import map_points, position_order, query_reading, rotary_orders
from core.causal.effects import parse_head_codes
from core.causal.effects_compare import (
    RankCorrelation,
    attribution_correlations,
    correlation_sentence,
    default_token,
    default_word,
    importance_summary,
)
from core.causal.token_attribution import Attribution, unconverged_sentence
from core.maths.alignment import align_point
from core.outputs.lens import lens_position
from core.representations.senses import chance_sentence
from core.teaching.tour import knockout_shares
from viz.tour_sentences import KNOCKOUT_CAVEAT, knockout_sentences

# --- Does it matter? -----------------------------------------------------------------------------------------------

def test_head_codes_are_read_in_any_case_once_each_and_unknown_parts_are_returned():
    heads, unknown = parse_head_codes(" l0h1, L1H0;L0H1  L2H0 x  ", num_layers=2, num_heads=2)
    assert heads == ((0, 1), (1, 0))
    assert unknown == ["L2H0", "X"]
    assert parse_head_codes("", 2, 2) == ((), [])
    assert parse_head_codes("L01H1", 2, 2) == ((), ["L01H1"])  # the code as head_code writes it, nothing else


def test_the_default_token_is_the_longest_non_special_one_the_last_of_equals():
    labels = ["[CLS]", "ab", "river", "bank", "green", "[SEP]"]
    special = np.array([True, False, False, False, False, True])
    assert default_token(labels, special) == 4  # "river" and "green" both 5 long: the later one
    assert default_token(["[CLS]", "[SEP]x"], np.array([True, True])) == 1  # every token special: the longest


def test_the_default_word_is_the_chosen_one_if_shared_else_the_longest():
    assert default_word(["bank", "the", "river"], "bank") == "bank"
    assert default_word(["bank", "the", "river", "green"], "cat") == "green"
    assert default_word(["bank"], None) == "bank"


def test_importance_summary_against_a_sort_by_hand():
    importance = np.array([[0.1, 0.5, 0.2], [0.9, 0.0, 0.3]])
    summary = importance_summary(importance, k=3)
    assert summary.top == [(1, 0, 0.9), (0, 1, 0.5), (1, 2, 0.3)]
    assert summary.median == pytest.approx(statistics.median([0.1, 0.5, 0.2, 0.9, 0.0, 0.3]))


def _attribution(scores, special, first_token_kept=False) -> Attribution:
    return Attribution(tokens=[str(i) for i in range(len(scores))], input_ids=list(range(len(scores))),
                       scores=np.asarray(scores, dtype=np.float32), special_mask=np.asarray(special),
                       method="integrated_gradients", measure="embedding", output=1.0, baseline_output=0.0,
                       completeness_gap=0.5, steps=32, evaluations=64, first_token_kept=first_token_kept)


def test_attribution_correlations_leave_out_special_and_kept_first_tokens():
    special = [False, False, False, False, False, True]
    integrated = _attribution([9.0, -0.3, 0.1, -0.2, 0.4, 0.0], special, first_token_kept=True)
    simple = _attribution([1.0, 0.2, -0.4, 0.1, 0.3, 5.0], special)
    rollout = np.array([0.5, 0.1, 0.3, 0.2, 0.4, 0.9])
    with_rollout, with_gradient = attribution_correlations(integrated, simple, rollout)
    kept = [1, 2, 3, 4]  # not the special last token, not the kept first one
    ig = np.abs([-0.3, 0.1, -0.2, 0.4])
    assert with_rollout.n == with_gradient.n == 4
    assert with_rollout.rho == pytest.approx(spearmanr(ig, rollout[kept]).statistic)
    assert with_gradient.rho == pytest.approx(spearmanr(ig, np.abs(np.array([0.2, -0.4, 0.1, 0.3]))).statistic)
    assert attribution_correlations(_attribution([1.0, 2.0, 0.0], [False, False, True]),
                                    _attribution([1.0, 2.0, 0.0], [False, False, True]), np.ones(3)) is None


def test_correlation_sentences_say_the_numbers():
    assert "undefined" in correlation_sentence(RankCorrelation(float("nan"), float("nan"), 4), "a and b")
    strong = correlation_sentence(RankCorrelation(0.81, 0.001, 12), "a and b")
    assert "**+0.81** over 12 items, a strong positive relation" in strong and "p = 0.001" in strong
    weak = correlation_sentence(RankCorrelation(-0.25, 0.4, 10), "a and b")
    assert "a weak negative relation" in weak and "could easily arise by chance" in weak


def test_the_unconverged_sentence_gives_the_sum_the_change_and_the_gap():
    sentence = unconverged_sentence(_attribution([0.25, 0.5], [False, False]), more_steps_possible=True)
    assert "their sum is 0.7500 against a change of 1.0000" in sentence
    assert "completeness gap 50%" in sentence and "after 64 gradients" in sentence
    assert sentence.endswith("More integration steps may help.")
    assert not unconverged_sentence(_attribution([0.25, 0.5], [False, False]), False).endswith("help.")


def test_the_lens_opens_at_a_masked_models_mask_else_at_the_last_token():
    analysis = SimpleNamespace(input_ids=[101, 7, 103, 8, 103, 102], num_tokens=6)
    assert lens_position(analysis, "masked", 103) == 2
    assert lens_position(analysis, "masked", 999) == 5
    assert lens_position(analysis, "causal", 103) == 5


# --- Queries and keys ------------------------------------------------------------------------------------------------

def _fake_map(coords, weights_by_query, keys_by_query, positions):
    return SimpleNamespace(
        num_tokens=len(positions), coords=np.asarray(coords, dtype=np.float32), position=np.asarray(positions),
        text_index=np.zeros(len(positions), dtype=int), tokens=[f"t{i}" for i in range(len(positions))],
        attention=lambda q: (np.asarray(keys_by_query[q]), np.asarray(weights_by_query[q])))


def test_a_querys_reading_its_top_keys_and_nearest_key_on_the_map():
    # three tokens: queries at rows 0-2, keys at rows 3-5; query 2 sees keys 0, 1, 2
    coords = [[0, 0], [1, 0], [5, 5], [9, 9], [5, 4], [0, 0]]
    qmap = _fake_map(coords, {2: [0.2, 0.5, 0.3]}, {2: [0, 1, 2]}, [0, 1, 2])
    reading = query_reading(qmap, 2, top=2)
    assert reading.keys.tolist() == [1, 2] and reading.weights.tolist() == [0.5, 0.3]
    assert reading.nearest == 1 and reading.nearest_weight == 0.5  # key 1 at (5, 4), one away from (5, 5)


def test_rotary_orders_read_both_maps_by_the_same_positions():
    positions = [0, 1, 2, 3, 4, 5, 6, 7]
    line = [[p, 0.0] for p in positions] * 2  # queries then keys, ordered by position
    scrambled = np.random.default_rng(0).normal(size=(16, 2))
    rotated, unrotated = _fake_map(line, {}, {}, positions), _fake_map(scrambled, {}, {}, positions)
    after, before = rotary_orders(rotated, unrotated)
    both = np.array(positions * 2)
    assert after == pytest.approx(position_order(np.asarray(line, dtype=np.float32), both)) and after > 0.9
    assert before == pytest.approx(position_order(scrambled.astype(np.float32), both))


def test_map_points_list_the_queries_then_the_keys():
    qmap = _fake_map([[0, 1], [2, 3], [4, 5], [6, 7]], {}, {}, [0, 1])
    qmap.text_index = np.array([0, 1])
    table = map_points(qmap)
    assert table["kind"].tolist() == ["query", "query", "key", "key"]
    assert table["document"].tolist() == [1, 2, 1, 2] and table["position"].tolist() == [0, 1, 0, 1]
    assert table["x"].tolist() == [0, 2, 4, 6] and table["token"].tolist() == ["t0", "t1", "t0", "t1"]


# --- Maxima ------------------------------------------------------------------------------------------------------------

def test_layer_panels_one_head_or_the_mean_of_the_heads():
    rng = np.random.default_rng(1)
    attentions, weighted, rolled = rng.random((2, 3, 4, 4)), rng.random((2, 3, 4, 4)), rng.random((2, 4, 4))
    panels = layer_panels(attentions, weighted, rolled, 1, None)
    raw, norm, roll = panels.values()
    np.testing.assert_allclose(raw, (attentions[1, 0] + attentions[1, 1] + attentions[1, 2]) / 3)
    mean_weighted = (weighted[1, 0] + weighted[1, 1] + weighted[1, 2]) / 3
    np.testing.assert_allclose(norm, mean_weighted / mean_weighted.sum(axis=1, keepdims=True))
    np.testing.assert_array_equal(roll, rolled[1])
    assert list(panels) == ["raw attention, layer 1", "norm-weighted, layer 1 (share of row)", "rollout, layers 0–1"]
    only_raw = layer_panels(attentions, None, None, 0, 2)
    assert list(only_raw) == ["raw attention, layer 0"]
    np.testing.assert_array_equal(only_raw["raw attention, layer 0"], attentions[0, 2])


# --- Inside one head ---------------------------------------------------------------------------------------------------

def _step(t=4, d=4, window=None, rotary=False, bias=None, scale=None):
    rng = np.random.default_rng(2)
    keep = np.tril(np.ones((t, t), dtype=bool))
    if window:
        keep &= ~np.tril(np.ones((t, t), dtype=bool), -window)
    queries = rng.normal(size=(t, d))
    before = None
    if rotary:
        before = queries.copy()
        before[-1, :2] += 1.0  # the last token's first two components turned
    scaled = rng.normal(size=(t, t))
    return SimpleNamespace(queries=queries, queries_before_rotary=before, keys=rng.normal(size=(t, d)),
                           scale=d**-0.5 if scale is None else scale, keep_mask=keep, scores=scaled * 2, scaled=scaled,
                           weights=np.where(keep, 1.0 / keep.sum(axis=1, keepdims=True), 0.0),
                           **({} if bias is None else {"bias": bias}))


def test_head_facts_read_off_a_head_by_hand():
    facts = head_facts(_step(rotary=True))
    assert (facts.head_size, facts.rotated_components, facts.standard_scale, facts.position_bias, facts.sliding) == \
        (4, 2, True, False, False)
    assert head_facts(_step(window=2)).sliding
    assert not head_facts(_step(scale=1.0)).standard_scale
    assert head_facts(_step(bias=np.full((4, 4), 0.5))).position_bias
    assert not head_facts(_step(bias=np.zeros((4, 4)))).position_bias


def test_the_check_against_the_models_own_weights_and_the_tables():
    step = _step()
    own = step.weights.copy()
    own[2, 0] += 3e-4
    assert largest_difference(step, own) == pytest.approx(3e-4)
    masked = masked_scores(step)
    assert math.isnan(masked[0, 1]) and masked[3, 1] == step.scaled[3, 1]
    labels = ["a", "b", "c", "d"]
    table = weights_table(step, labels, labels, own)
    assert len(table) == 16 and table.iloc[9][["query", "key"]].tolist() == ["c", "b"]
    assert table.iloc[8]["model"] == own[2, 0]
    scores = scores_table(_step(bias=np.full((4, 4), 0.5)), 1, labels)
    assert list(scores.columns) == ["position", "key token", "q·k", "position bias", "scaled", "weight", "visible"]
    assert scores["visible"].tolist() == [True, True, False, False]
    keys = per_token_table(step.keys, labels, "k")
    assert list(keys.columns) == ["position", "token", "k0", "k1", "k2", "k3"] and keys["k3"][1] == step.keys[1, 3]
    assert first_word(np.array([True, True, False])) == 2 and first_word(np.array([True])) == 0


# --- Senses --------------------------------------------------------------------------------------------------------------

def test_the_chance_sentence_compares_the_two_numbers():
    assert chance_sentence(float("nan"), 0.5) == "."
    assert chance_sentence(0.8, 0.5) == ": 1-NN accuracy there is 0.800, against a chance line of 0.500."
    assert "at chance (0.500" in chance_sentence(0.5, 0.5)
    assert "under the chance line of 0.500" in chance_sentence(0.3, 0.5)


def test_a_point_is_moved_by_the_transform_that_aligns_its_layout():
    layout = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    turn = np.array([[0.0, 1.0], [-1.0, 0.0]])  # a quarter turn
    reference = 2 * layout @ turn + [3.0, -1.0]
    np.testing.assert_allclose(align_point(layout, reference, [0.5, 2.0]), 2 * np.array([0.5, 2.0]) @ turn + [3.0, -1.0],
                               atol=1e-9)


# --- the guided tour -----------------------------------------------------------------------------------------------------

def test_knockout_shares_read_the_head_statistics_table():
    table = pd.DataFrame({"layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "first": [0.5, 0.1, np.nan, 0.2],
                          "end": [0.25, 0.0, 0.1, 0.2], "previous": [0.1, 0.7, 0.3, 0.05]})
    sinks, previous, mean_sink = knockout_shares(table, [(0, 0), (1, 1)])
    assert sinks == [0.75, 0.4] and previous == [0.1, 0.05]
    assert mean_sink == pytest.approx((0.75 + 0.1 + 0.4) / 3)  # the NaN head left out


def test_knockout_sentences_name_both_heads_or_the_one():
    sink, previous = (2, 1, 0.8), (0, 3, 0.6)
    both = knockout_sentences(sink, previous, 0.25, {(2, 1): 0.01, (0, 3): 0.05}, "the first token", 12, 0.4)
    assert both.startswith(KNOCKOUT_CAVEAT)
    assert "**layer 2, head 1** gives the largest share of its attention to the first token, **80%**" in both
    assert "the mean over all 12 heads is 40.0%" in both and "cosine **0.9900**" in both
    assert "**layer 0, head 3** (60% to the token before; an even spread gives 25%), leaves it at cosine **0.9500**" in both
    assert "changes your sentence less than the previous-token head (0.01 vs 0.05" in both
    one = knockout_sentences(sink, None, 0.25, {(2, 1): 0.01}, "the first token", 12, 0.4)
    assert "previous-token head of step 4" not in one and one.endswith(
        "1 − cosine is 0.01; the importance map compares it with every other head.")
