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
