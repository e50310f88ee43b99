"""Issue 40's sweep: sentences that compare noisy numbers say "about the same" within a stated margin, token labels
follow the one rule, and cell text contrasts with its cell; on hand-made numbers through the pure functions."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest


def _losses(first: float, second: float):
    return SimpleNamespace(first=first, second=second)


@pytest.mark.parametrize("plain, knocked, verb", [
    (2.0, 2.01, "stays about the same"),   # 0.01 nats: within the margin, was "rises"
    (2.0, 1.99, "stays about the same"),   # was "does not rise"
    (2.0, 2.50, "rises"),
    (2.0, 1.50, "falls"),
])
def test_the_knockout_sentence_says_about_the_same_within_the_loss_margin(plain, knocked, verb):
    from ui.lm_views import LOSS_MARGIN, knockout_text

    assert abs(knocked - plain) <= LOSS_MARGIN or verb != "stays about the same"
    sentence = knockout_text(_losses(5.0, plain), _losses(5.1, knocked), "L1H2, L3H4", 2)
    assert f"the second copy's loss {verb}" in sentence
    assert f"{knocked:.2f} nats (first copy 5.10)" in sentence and "-0.00" not in sentence


def test_the_generation_csv_writes_alternatives_by_the_token_label_rule():
    from core.generation import Step
    from ui.lm_views import generation_table

    # id 7 is the first byte of "é" alone: decoded on its own it is "\ufffd", for display "<0xC3>"
    steps = [Step(5, " my", 0.5, 0.5, False, [(5, " my", 0.5), (7, "\ufffd", 0.25), (9, "\n", 0.125)])]
    shown = {5: " my", 7: "<0xC3>", 9: "\n"}
    row = generation_table(steps, shown)[0]
    assert row["alternatives"] == "·my 0.500 | <0xC3> 0.250 | \\n 0.125"  # was "' my' 0.500 | '\ufffd' 0.250 | ..."
    assert (row["step"], row["token_id"], row["probability"]) == (1, 5, 0.5)


def test_the_tour_sampling_sentence_labels_tokens_by_the_rule_not_their_raw_text():
    from core.generation import Step
    from ui.tour_lm import sampling_sentence

    # the sampler's second token is the first byte of "é" alone: its own text decodes to "\ufffd"
    greedy = [Step(1, " the", 0.6, 0.6, False), Step(2, " cat", 0.5, 0.5, False)]
    sampled = [Step(1, " the", 0.6, 0.6, False), Step(7, "\ufffd", 0.01, 0.02, False)]
    shown = {1: " the", 2: " cat", 7: "<0xC3>"}
    sentence = sampling_sentence(greedy, sampled, shown, " the cat", " theé", 1.0, 0)
    assert "\ufffd" not in sentence
    assert "The two part at token 2" in sentence
    # where they part, and the least likely token (markdown-escaped)
    assert sentence.count("“\\<0xC3\\>”") == 2 and "“·cat”" in sentence
