"""``core.model.pass_progress``: the layer reached and the time left, each expectation worked out by hand."""

from __future__ import annotations

import pytest

from core.model.pass_progress import layer_progress, time_left


@pytest.mark.parametrize("done, total, elapsed, said", [
    (12, 30, 13.3, "layer 12 of 30, about 20 s left"),  # 13.3 / 12 × 18 = 19.95 s → nearest 5 s: 20
    (0, 30, 5.0, "layer 0 of 30"),  # nothing done yet: nothing to estimate from
    (30, 30, 40.0, "layer 30 of 30"),
    (1, 30, 0.01, "layer 1 of 30, under a second left"),  # 0.01 × 29 = 0.29 s
    (10, 30, 35.0, "layer 10 of 30, about 1 min 10 s left"),  # 3.5 × 20 = 70 s
    (3, 24, 2.0, "layer 3 of 24, about 15 s left"),  # 2 / 3 × 21 = 14 s → nearest 5 s: 15
    (2, 24, 1.0, "layer 2 of 24, about 10 s left"),  # 0.5 × 22 = 11 s → nearest 5 s: 10
    (1, 12, 0.5, "layer 1 of 12, about 6 s left"),  # 0.5 × 11 = 5.5 s → halves up: 6
])
def test_layer_progress(done, total, elapsed, said):
    assert layer_progress(done, total, elapsed) == said


@pytest.mark.parametrize("seconds, said", [
    (0.0, "under a second left"),
    (0.99, "under a second left"),
    (1.0, "about 1 s left"),
    (2.5, "about 3 s left"),  # halves up, not to even
    (9.4, "about 9 s left"),
    (9.6, "about 10 s left"),
    (12.4, "about 10 s left"),
    (12.5, "about 15 s left"),
    (57.4, "about 55 s left"),
    (57.5, "about 1 min left"),  # 60 s is one minute, not "60 s"
    (64.0, "about 1 min left"),
    (65.0, "about 1 min 10 s left"),
    (599.0, "about 10 min left"),
    (725.0, "about 12 min left"),  # 12.08 min → nearest minute
    (3900.0, "about 1 h 5 min left"),
    (-3.0, "under a second left"),
])
def test_time_left(seconds, said):
    assert time_left(seconds) == said
