"""Comparisons with a margin (core/maths/margins.py) and the wording of numbers and colours (viz/wording.py), on
hand-made numbers."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from core.maths.margins import leads_from, plateau, runs
from core.maths.numbers import fixed, percent, percent_span, probability
from viz.wording import colour_words, rank_colour_key


def test_a_plateau_is_every_layer_within_the_margin_of_the_best_around_it():
    # the reviewer's shape: layers 0-20 restore 99.2-101.7 %, then the detail moves away
    values = np.array([1.000, 0.992, 1.004, 1.010, 1.017, 0.995, 0.52, 0.49, 1.0, -0.03])
    assert plateau(values, 0.05) == (0, 5)  # not the argmax 4, and not the later 1.0 past the drop
    assert plateau(values, 0.0) == (4, 4)
    assert plateau(np.array([0.1, np.nan, 0.9, 0.88, 0.2]), 0.05) == (2, 3)  # NaN ignored and ends a plateau
    assert plateau(np.array([0.5]), 0.05) == (0, 0)


def test_leads_from_is_the_first_layer_from_which_the_lead_lasts_with_its_margin():
    last = np.array([0.00, 0.02, 0.01, 0.10, 0.90, 0.82, 0.86])
    changed = np.array([[0.20, 0.01, -0.01, 0.00, 0.00, -0.01, 0.00],   # leads by less than the margin at 1 and 2
                        [0.71, 0.92, 0.85, 0.74, 0.00, 0.01, 0.01]])
    assert leads_from(last, changed, 0.05) == 4  # not 1 (ahead of the first row once), not 3 (behind the second)
    assert leads_from(last, changed[0], 0.05) == 3
    assert leads_from(last, changed, 0.9) is None  # never ahead by that much at the last layer
    assert leads_from(np.array([0.9, 0.9]), np.array([0.1, 0.1]), 0.05) == 0
    assert leads_from(np.array([0.9, 0.12]), np.array([0.1, 0.1]), 0.05) is None  # not at the end: no lasting lead
    assert leads_from(last, np.empty((0, 7)), 0.05) is None


def test_runs_of_true_entries():
    assert runs(np.array([True, True, False, True, False, False, True])) == [(0, 1), (3, 3), (6, 6)]
    assert runs(np.array([False, False])) == [] and runs(np.array([True])) == [(0, 0)]


@pytest.mark.parametrize("value, expected", [
    (0.0002, "0.020%"),  # the reviewer's ' cray': 0.020 %, written "0.0%" before
    (0.000045, "0.0045%"),
    (0.00099, "0.099%"),
    (0.001, "0.1%"),
    (0.5, "50.0%"),
    (1.0, "100.0%"),
    (0.0, "0.0%"),
    (4e-7, "less than 0.0001%"),
])
def test_a_small_probability_keeps_two_significant_digits(value, expected):
    assert probability(value) == expected


def test_percentages_and_decimals_never_print_a_negative_zero():
    assert percent(-0.004) == "0%" and percent(-0.004, 1) == "-0.4%" and percent(-0.006) == "-1%"  # "layer 29 -0%"
    assert percent(0.004) == "0.4%"  # positive and small: not rounded away
    assert percent(0.923) == "92%"
    assert fixed(-0.0) == "0.00" and fixed(-0.004) == "0.00" and fixed(-0.006) == "-0.01"  # "-0.00 after"
    assert percent_span([0.71, 0.92, 0.85]) == "71%–92%" and percent_span([0.001, -0.001]) == "0%–0.1%"
    assert percent_span([0.5, 0.501]) == "50%"


def test_colour_words_of_the_figures_scales():
    assert colour_words("#fde725") == "light yellow" and colour_words("#440154") == "dark purple"  # Viridis' ends
    assert colour_words("rgb(103,0,31)") == "dark red" and colour_words("#ffffff") == "light grey"


def test_the_rank_key_reads_which_end_of_the_scale_rank_one_gets():
    z = np.log10(np.array([[1, 10, 1000], [1, 1, 1]]))
    reversed_viridis = go.Heatmap(z=z, colorscale="Viridis", reversescale=True, zmin=0)
    assert rank_colour_key(reversed_viridis).startswith("A light yellow cell means rank 1, the final prediction "
                                                        "already on top; the colours run to dark purple at rank 1,000")
    assert rank_colour_key(go.Heatmap(z=z, colorscale="Viridis", zmin=0)).startswith("A dark purple cell means rank 1")
    assert "rank 10,000" in rank_colour_key(go.Heatmap(z=z, colorscale="Viridis", zmin=0, zmax=4))
    assert "same colour" in rank_colour_key(go.Heatmap(z=np.zeros((2, 2)), colorscale="Viridis", zmin=0))
