"""The lens summary by hand, and the grid figure on a tiny GPT-2's real lens."""

from __future__ import annotations

import numpy as np
import pytest

from core.outputs.lens import lens_summary
from viz.lens_grid import final_rank_grid, lens_sentence


@pytest.fixture(scope="module")
def tiny_gpt2_lm_and_lens(tmp_path_factory):
    from core.model.inference import analyze
    from core.model.models import load_model
    from core.outputs.lens import logit_lens
    from core.outputs.predictions import load_language_model
    from tests.model_factory import build_tiny_gpt2_lm

    model = load_model(str(build_tiny_gpt2_lm(tmp_path_factory.mktemp("models") / "gpt2-lm")))
    return logit_lens(load_language_model(model), analyze(model, "the cat sat on the mat"))


def test_first_top_and_settled_by_hand():
    ranks = np.array([[3, 0, 5], [0, 0, 2], [1, 0, 0], [0, 0, 0]])  # [hidden states, T]
    s = lens_summary(ranks)
    assert s.first_top.tolist() == [1, 0, 2] and s.settled.tolist() == [3, 0, 2]


def test_grid_on_a_real_lens(tiny_gpt2_lm_and_lens):
    lens = tiny_gpt2_lm_and_lens
    s = lens_summary(lens.final_ranks)
    top = [[c[0] for c in layer] for layer in lens.candidates]
    final = top[-1]
    fig = final_rank_grid(lens.tokens, top, lens.final_ranks, s, final)
    assert fig.data[0].z.shape == lens.final_ranks.shape
    for t, start in enumerate(s.settled):
        assert np.all(lens.final_ranks[start:, t] == 0) and (start == 0 or lens.final_ranks[start - 1, t] > 0)
    assert "stays on top from hidden state" in lens_sentence(lens.tokens, final, s, lens.final_ranks.shape[0] - 1)
