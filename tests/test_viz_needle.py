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


def _result(needle_span=(40, 50), depth=0.26, at_sentence_end=False, answer_span=(200, 214)):
    from core.attention_heads.retrieval import RetrievalScores

    return RetrievalScores(np.zeros((2, 2)), np.zeros((2, 2, 14), dtype=bool), needle_span, answer_span,
                           list(range(answer_span[1])), np.ones(14, dtype=bool), math.log(0.417), depth, at_sentence_end)


def test_the_answer_sentence_says_where_the_needle_went_when_it_is_not_the_depth_asked():
    from core.attention_heads.retrieval import ModelAnswer
    from viz.needle import answer_sentence

    written = ModelAnswer(" purple basil.", 4, False)
    moved = answer_sentence(_result(), 0.25, written, "purple basil").replace("\\", "")
    assert "After 200 tokens (the needle at tokens 40–49, 26% of the way into the haystack: no sentence ends " in moved
    assert "within 3% of the text of the 25% asked, so it goes between the two words nearest it)" in moved
    assert "it contains the expected answer “purple basil”" in moved
    there = answer_sentence(_result(depth=0.5, at_sentence_end=True), 0.5, written, "purple basil")
    assert "50% of the way into the haystack)" in there and "asked" not in there
    end = answer_sentence(_result(depth=0.53, at_sentence_end=True), 0.5, written, "purple basil")
    assert "53% of the way into the haystack: the sentence end nearest the 50% asked)" in end


def test_an_answer_cut_at_its_step_limit_says_so_and_newlines_are_written_as_backslash_n():
    """Issue 50, items 5 and 15: "\\n" inside the quotes, never a paragraph break; an answer stopped by the step limit
    without the expected one is said to be cut, beside the expected answer's length."""
    from core.attention_heads.retrieval import ModelAnswer
    from viz.needle import answer_sentence

    said = answer_sentence(_result(), 0.25, ModelAnswer(" ab\n\ncd", 18, True), "purple basil")
    assert "\n" not in said
    assert "greedy answer is “ab\\\\n\\\\ncd”" in said  # \n, its backslash escaped for markdown
    assert ("does not contain the expected answer “purple basil” in the 18 tokens it was let write (it had not ended "
            "its answer; the expected one is 14 tokens)") in said
    ended = answer_sentence(_result(), 0.25, ModelAnswer(" no", 2, False), "purple basil")
    assert "let write" not in ended and "does not contain the expected answer" in ended


def _grid(starts):
    from core.attention_heads.retrieval import DepthLengthGrid

    probabilities = np.array([[0.2, 0.1], [0.6, 0.3], [0.6, 0.2]])
    return DepthLengthGrid((0.0, 0.25, 0.5), (256, 512), probabilities, np.zeros((3, 2), dtype=bool),
                           np.full((3, 2), 300), np.ones((3, 2), dtype=bool), np.array(starts))


def test_two_depths_that_share_one_placement_are_said_to():
    """Issue 50, item 1: at 256 tokens, 25 % and 50 % put the needle at token 4 (one placement measured twice)."""
    from viz.needle import grid_sentence, grid_table

    shared = grid_sentence(_grid([[0, 0], [4, 130], [4, 260]]))
    assert ("At 256 tokens the depths 25% and 50% put the needle at the same place (token 4), so their cells measure "
            "one placement.") in shared
    assert "At 512 tokens" not in shared
    assert "same place" not in grid_sentence(_grid([[0, 0], [60, 130], [120, 260]]))
    assert list(grid_table(_grid([[0, 0], [4, 130], [4, 260]]))["needle's first token"]) == [0, 4, 4, 0, 130, 260]
