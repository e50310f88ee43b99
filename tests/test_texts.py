"""Sentences the app used to show that were wrong for the model on screen (issue 12) must not come back."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHOWN = sorted((ROOT / "app_pages").glob("*.py")) + sorted((ROOT / "viz").glob("*.py")) + [ROOT / "README.md"]

WRONG = [
    "is a no-op",  # Kobayashi et al.: the sink's contribution is small, not zero
    "only the tokens before it",  # a decoder token also sees itself
    "falls as context is mixed in",  # drift is the whole transformation, not context
    "Layer k (1 … L) is the output of block k",  # off by one: block l writes hidden state l + 1
    "output of transformer block k",
    "high cosine in deep layers",  # false for the bundled model (0.075 at its last layer)
    "Early layers tend to look at their neighbours",  # only with special tokens left out; now computed
    "reaches each token after blocks 0 to *l*.  ",  # rollout stated as fact, without "heuristic"
]


@pytest.mark.parametrize("phrase", WRONG)
def test_wrong_sentence_is_gone(phrase):
    found = [path.name for path in SHOWN if phrase in path.read_text(encoding="utf-8")]
    assert not found, f"{phrase!r} still in {found}"


@pytest.mark.parametrize("page", ["app_pages/attention.py", "app_pages/maxima.py"])
def test_rollout_is_called_a_heuristic(page):
    assert "heuristic" in (ROOT / page).read_text(encoding="utf-8")
