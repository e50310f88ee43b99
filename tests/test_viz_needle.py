"""The needle page's sentences (viz.needle) from numbers worked out by hand."""

from __future__ import annotations

import math

import numpy as np

from viz.needle import knockout_sentence, scores_sentence, scores_table


def test_a_difference_is_claimed_only_past_a_factor_of_two():
    clear = knockout_sentence(math.log(0.2), math.log(0.05), math.log(0.18), 5)
    assert "top 5 retrieval head(s) knocked out it is 5.0%, with 5 random head(s) 18.0%" in clear
    assert "3.6 times less likely than knocking out random ones" in clear  # 0.18 / 0.05
    close = knockout_sentence(math.log(0.2), math.log(0.12), math.log(0.2), 3)  # 0.2 / 0.12 = 1.67 < 2
    assert "do not show that the retrieval heads matter more" in close and "times less likely" not in close
    reverse = knockout_sentence(math.log(0.2), math.log(0.3), math.log(0.1), 3)
    assert "Knocking out the random heads left the answer 3.0 times less likely" in reverse


def test_the_scores_sentence_counts_the_heads_that_copy_and_names_the_best():
    scores = np.array([[0.0, 0.5, 0.0], [1.0, 0.0, 0.5]])  # 2 needle tokens: 0.5 = 1 of 2
    assert scores_sentence(scores, 2) == ("3 of the 6 heads copied at least one of the answer's 2 needle token(s); the "
                                          "best, layer 1 head 0, copied 2 of them (100%).")
    assert scores_sentence(np.zeros((2, 3)), 2).startswith("No head of the 6 copied")
    table = scores_table(scores)
    assert list(table["layer"]) == [0, 0, 0, 1, 1, 1] and list(table["head"]) == [0, 1, 2, 0, 1, 2]
    assert list(table["retrieval score"]) == [0.0, 0.5, 0.0, 1.0, 0.0, 0.5]
