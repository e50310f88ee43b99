"""Issue 40: the sentences of the language-model views on SmolLM2-135M-Instruct, with the reviewer's prompts, say
what the numbers on screen say. Expected values come from the figure's own numbers worked by hand, and a few cells
are recomputed with hooks on the model."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from tests.test_ablated_views import trace_array
from tests.test_app import open_app, page_errors

pytestmark = [pytest.mark.app, pytest.mark.integration]
MODEL = "SmolLM2-135M-Instruct"
EIFFEL, COLOSSEUM = "The Eiffel Tower stands in the city of", "The Colosseum stands in the city of"
SARAH_DAVID = "After Sarah and David arrived at the party, David handed a cake to"
SARAH_SARAH = "After Sarah and David arrived at the party, Sarah handed a cake to"
MARGIN = 0.05  # the sentences' margin: 5 points of the way from corrupted to clean


@pytest.fixture(scope="module")
def smollm2(bundled_lm):
    from core.outputs.predictions import load_language_model

    return load_language_model(bundled_lm)


def _said(at) -> str:
    return " ".join(m.value for m in at.markdown).replace("\\", "")  # markdown escapes, as the reader sees it


def _grid(at) -> np.ndarray:
    (chart,) = at.get("plotly_chart")
    return trace_array(json.loads(chart.proto.spec)["data"][0]["z"])


def _restored(lm, clean: str, corrupted: str, answer: str, wrong: str, layer: int, position: int) -> float:
    """The corrupted run with block ``layer``'s input at ``position`` copied from the clean run, by a hook of its
    own: 0 = the corrupted run's logit difference, 1 = the clean run's."""
    ids = [lm.tokenizer(t, return_tensors="pt")["input_ids"] for t in (clean, corrupted)]
    a, w = (lm.tokenizer(t, add_special_tokens=False)["input_ids"][0] for t in (answer, wrong))
    with torch.no_grad():
        out = lm.model(input_ids=ids[0], output_hidden_states=True)
        saved = out.hidden_states[layer][0, position].clone()

        def diff(x):
            logits = lm.model(input_ids=x).logits[0, -1].double()
            return float(logits[a] - logits[w])

        def hook(module, args, kwargs):
            x = (args[0] if args else kwargs["hidden_states"]).clone()
            x[0, position] = saved
            return ((x, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": x})
        clean_diff, corrupted_diff = diff(ids[0]), diff(ids[1])
        handle = lm.model.model.layers[layer].register_forward_pre_hook(hook, with_kwargs=True)
        try:
            patched = diff(ids[1])
        finally:
            handle.remove()
    return (patched - corrupted_diff) / (clean_diff - corrupted_diff)


def test_the_tours_patching_step_says_where_the_detail_moves_from_every_changed_position(smollm2):
    """Item 1: the move is at layer 24 (the last position 10 % → 90 %, ' iffel' 74 % → 0 %), not at layer 7."""
    at = open_app({"model": MODEL, "track": "lm", "step": "5", "clean": EIFFEL, "corrupted": COLOSSEUM,
                   "answer": " Paris", "wrong": " Rome"}, page="app_pages/tour.py")
    assert not page_errors(at), page_errors(at)
    grid, said = _grid(at), _said(at)
    changed, last = [1, 2, 3], grid.shape[1] - 1  # ' E', 'iffel', ' Tower' against ' Col', 'osse', 'um'
    for layer, position in [(23, 2), (24, 2), (23, last), (24, last)]:
        assert grid[layer, position] == pytest.approx(
            _restored(smollm2, EIFFEL, COLOSSEUM, " Paris", " Rome", layer, position), abs=2e-3)
    ahead = [bool(grid[l, last] > max(grid[l, p] for p in changed) + MARGIN) for l in range(len(grid))]
    moved = next(l for l in range(len(grid)) if all(ahead[l:]))
    assert moved == 24 and grid[23, 2] > 0.7 and grid[24, last] > 0.85  # what the reviewer measured
    assert f"From layer {moved} on, the last position (“·of”) restores more than every changed position" in said, said
    assert "From layer 7 on" not in said and "-0%" not in said  # the old first crossing, with no margin
    assert "differ at positions 1, 2 and 3 (“·E”, “iffel”, “·Tower” against “·Col”, “osse”, “um”)" in said
    low, high = grid[:moved, 2].min(), grid[:moved, 2].max()
    assert f"Patched at “iffel” (position 2), layers 0–{moved - 1} restore {low:.0%}–{high:.0%}" in said


def test_the_patching_sentence_names_the_plateau_not_its_argmax(smollm2):
    """Item 6: position 9 (' David') restores 99.2–101.7 % at layers 0–20; the best of those is noise."""
    at = open_app({"model": MODEL, "clean": SARAH_DAVID, "corrupted": SARAH_SARAH, "answer": " Sarah",
                   "wrong": " David"}, page="app_pages/patching.py")
    assert not page_errors(at), page_errors(at)
    grid, said = _grid(at), _said(at)
    assert grid[20, 9] == pytest.approx(_restored(smollm2, SARAH_DAVID, SARAH_SARAH, " Sarah", " David", 20, 9),
                                        abs=2e-3)
    best = grid.max()
    near = grid >= best - MARGIN
    layers = np.flatnonzero(near[:, 9])
    assert list(layers) == list(range(21))  # one run: layers 0-20
    values = grid[layers, 9]
    assert f"position 9 (“·David”) at layers 0–20 ({values.min():.0%}–{values.max():.0%})" in said, said
    assert f"{int(near.sum())} cells are within 5 points of that" in said
    assert "restores most at layer 20" not in said


def test_the_sampling_step_writes_a_small_probability_with_its_digits(smollm2):
    """Item 7: the least likely token the sampler drew is written with two significant digits, not "0.0%"."""
    from core.outputs.generation import generate
    from core.teaching.examples import BANK_RIVER

    at = open_app({"model": MODEL, "track": "lm", "step": "2", "text": BANK_RIVER, "temp": "1.2", "seed": "0"},
                  page="app_pages/tour.py")
    assert not page_errors(at), page_errors(at)
    sampled = generate(smollm2, BANK_RIVER, steps=12, sample=True, seed=0, temperature=1.2, top_k=0, top_p=1.0)
    prompt = smollm2.tokenizer(BANK_RIVER, return_tensors="pt")["input_ids"]
    ids = torch.cat([prompt, torch.tensor([[s.token_id for s in sampled.steps]])], dim=1)
    with torch.no_grad():
        probs = smollm2.model(input_ids=ids).logits[0].double().softmax(-1)
    start = prompt.shape[1] - 1
    drawn = [float(probs[start + i, s.token_id]) for i, s in enumerate(sampled.steps)]
    low = min(drawn)
    assert low < 0.0005  # "0.0%" before
    digits = 1 - math.floor(math.log10(low * 100))
    shown = "“" + sampled.steps[drawn.index(low)].text.replace(" ", "·") + "”"  # the token-label rule, by hand
    assert f"the sampler drew is {shown} at **{low * 100:.{digits}f}%**" in _said(at)
