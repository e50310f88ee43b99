"""Sampling controls and step-by-step generation against a direct computation on the model's logits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.outputs.generation import branch_from_param, branch_to_param, generate, next_token_distribution, sampling_distribution
from tests.lm_factory import tiny_lm  # noqa: F401 (fixture)

TEXT = "I will hike along the bank of a"


def _by_hand(lm, text, temperature, top_k, top_p):
    ids = lm.tokenizer(text, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = lm.model(input_ids=ids).logits[0, -1].double()
    p = torch.softmax(logits / temperature, -1)
    order = sorted(range(len(p)), key=lambda i: (-float(logits[i]), i))
    if top_k:
        order = order[:top_k]
    mass = sum(float(p[i]) for i in order)
    kept, running = [], 0.0
    for i in order:
        kept.append(i)
        running += float(p[i]) / mass
        if running >= top_p - 1e-12:
            break
    total = sum(float(p[i]) for i in kept)
    return kept, [float(p[i]) / total for i in kept]


@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, 0, 1.0), (0.7, 0, 0.9), (1.5, 20, 1.0), (2.0, 50, 0.5)])
def test_distribution_matches_a_direct_computation(tiny_lm, temperature, top_k, top_p):
    ids, probs = next_token_distribution(tiny_lm, TEXT, temperature=temperature, top_k=top_k, top_p=top_p)
    kept, expected = _by_hand(tiny_lm, TEXT, temperature, top_k, top_p)
    assert ids.tolist() == kept
    # float32 rounding: the app applies the head to the last position alone (``logits_to_keep``), the plain forward
    # to every position, and the two products round differently (measured: 6e-8 relative at most)
    np.testing.assert_allclose(probs, expected, rtol=1e-6)
    assert abs(probs.sum() - 1) < 1e-12 and np.all(np.diff(probs) <= 0)


def test_entropy_before_and_after_and_cut_tokens(tiny_lm):
    d = sampling_distribution(tiny_lm, TEXT, temperature=1.0, top_k=5)
    assert d.kept.sum() == 5 and np.all(d.probs[~d.kept] == 0)
    p = d.scaled
    assert d.entropy_before == pytest.approx(float(-(p * np.log(p)).sum()), rel=1e-9)
    q = p[:5] / p[:5].sum()
    assert d.entropy_after == pytest.approx(float(-(q * np.log(q)).sum()), rel=1e-9)
    assert d.entropy_after < d.entropy_before


def test_greedy_generation_is_the_models_own(tiny_lm):
    g = generate(tiny_lm, TEXT, steps=6, alternatives=3)
    ids = tiny_lm.tokenizer(TEXT, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        expected = tiny_lm.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6,
                                          do_sample=False, pad_token_id=0)[0, ids.shape[1]:]
    assert g.token_ids == expected.tolist()[: len(g.steps)]
    first = g.steps[0]
    with torch.no_grad():
        p = tiny_lm.model(input_ids=ids).logits[0, -1].double().softmax(-1)
    assert first.probability == pytest.approx(float(p.max()), rel=1e-6)  # float32 rounding, as above
    assert [a[0] for a in first.alternatives] == p.topk(4).indices.tolist()[1:]


def test_seeded_sampling_is_reproducible_and_branches_continue(tiny_lm):
    kwargs = dict(steps=5, sample=True, temperature=1.3, top_p=0.95)
    a = generate(tiny_lm, TEXT, seed=3, **kwargs)
    b = generate(tiny_lm, TEXT, seed=3, **kwargs)
    assert a.token_ids == b.token_ids
    alternative = a.steps[1].alternatives[0][0]
    branch = a.token_ids[:1] + [alternative]
    c = generate(tiny_lm, TEXT, seed=3, branch=branch_from_param(branch_to_param(branch), 10**6), **kwargs)
    assert c.token_ids[:2] == branch and [s.chosen for s in c.steps[:3]] == [True, True, False]
    # top-k = 1 leaves one token: sampling is greedy
    assert generate(tiny_lm, TEXT, steps=4, sample=True, top_k=1, seed=9).token_ids == \
        generate(tiny_lm, TEXT, steps=4).token_ids


def test_stop_and_progress(tiny_lm):
    seen = []
    g = generate(tiny_lm, TEXT, steps=5, progress=lambda done, total: seen.append((done, total)),
                 should_stop=lambda: len(seen) >= 2)
    assert g.stopped and len(g.steps) == 2 and seen == [(1, 5), (2, 5)]


def test_a_stopped_generation_resumes_to_the_uninterrupted_text(tiny_lm):
    kwargs = dict(steps=6, sample=True, seed=4, temperature=1.4)
    whole = generate(tiny_lm, TEXT, **kwargs)
    seen = []
    first = generate(tiny_lm, TEXT, **kwargs, progress=lambda done, total: seen.append(done),
                     should_stop=lambda: len(seen) >= 2)
    assert first.stopped and len(first.steps) == 2
    rest = generate(tiny_lm, TEXT, **kwargs, resume=first.steps)
    assert not rest.stopped and rest.token_ids == whole.token_ids and rest.text == whole.text
    # the same probabilities to float32's precision: the resumed call runs its first pass over the whole text where
    # the uninterrupted one ran a token at a time through its key/value cache
    assert np.allclose([s.probability for s in rest.steps], [s.probability for s in whole.steps], rtol=1e-5, atol=0)


def test_the_key_value_cache_gives_the_full_passes_probabilities(tiny_lm):
    """Generation runs one token at a time through the model's cache; each step's distribution must be the one a
    full forward pass over the text so far gives."""
    g = generate(tiny_lm, TEXT, steps=5, alternatives=3)
    ids = tiny_lm.tokenizer(TEXT, return_tensors="pt")["input_ids"][0]
    for step in g.steps:
        with torch.no_grad():
            probs = tiny_lm.model(input_ids=ids[None]).logits[0, -1].double().softmax(-1)
        assert step.probability == pytest.approx(float(probs[step.token_id]), rel=1e-5)
        assert [t for t, _, _ in step.alternatives] == [t for t in probs.topk(4).indices.tolist() if t != step.token_id][:3]
        ids = torch.cat([ids, ids.new_tensor([step.token_id])])


def test_bad_links_and_controls():
    assert branch_from_param("12.7.x.3", 100) == [12, 7]
    assert branch_from_param("<script>", 100) == [] and branch_from_param("5.500", 100) == [5]
    from core.outputs.generation import shape_distribution
    with pytest.raises(ValueError, match="temperature"):
        shape_distribution(torch.zeros(3), temperature=0)


def test_the_sentence_says_when_nothing_is_cut_and_writes_no_negative_zero():
    """Issue 40, item 8: "49,152 of 49,152 tokens can be drawn; the rest are cut." and "-0.00 after"."""
    from core.outputs.generation import shape_distribution
    from viz.generation import distribution_sentence

    logits = torch.tensor([3.0, 1.0, 0.5, 0.0])
    said = distribution_sentence(shape_distribution(logits), ["x", "y", "z", "w"])
    assert said.startswith("All 4 tokens can be drawn; nothing is cut.") and "the rest are cut" not in said
    cut = distribution_sentence(shape_distribution(logits, top_k=2), ["x", "y", "z", "w"])
    assert cut.startswith("2 of 4 tokens can be drawn; the rest are cut.")
    sharp = shape_distribution(torch.tensor([10.0, 0.0, 0.0]), temperature=0.05, top_k=1)
    assert sharp.entropy_after == 0 and sharp.entropy_before < 5e-3  # -(1 · log 1) is -0.0
    said = distribution_sentence(sharp, ["x", "y", "z"])
    assert "Entropy 0.00 nats before the cuts, 0.00 after (one token left" in said and "-0.00" not in said, said
