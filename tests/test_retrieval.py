"""Needle in a haystack (core.attention_heads.retrieval) against a plainly loaded eager model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from core.attention_heads.retrieval import answer_log_probability, build_prompt, needle_cut, retrieval_scores, top_and_random_heads
from core.errors import AnalysisError
from core.model.models import load_model
from core.outputs.predictions import load_language_model
from tests.lm_factory import build_tiny_llama_lm
from tests.plain_heads import zero_heads_hook

HAYSTACK = "The sun rose. A dog ran. The cat sat."
NEEDLE = "The code is cat mat."
QUESTION = "Code?"
ANSWER = " cat mat"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = build_tiny_llama_lm(tmp_path_factory.mktemp("models") / "llama", layers=3)
    model = load_model(str(folder))
    plain = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    return load_language_model(model), plain


def test_needle_goes_to_the_sentence_end_nearest_the_depth():
    text = "One two. Three four. Five six."  # sentences end at index 8 and 20 (after their ".")
    assert needle_cut(text, 0.0) == 0
    assert needle_cut(text, 1.0) == len(text)
    assert needle_cut(text, 0.3) == 8  # 0.3 × 30 = 9: nearest is right after "One two."
    assert needle_cut(text, 0.6) == 20  # 18 is 2 from 20 and 10 from 8
    with pytest.raises(AnalysisError):
        needle_cut(text, 1.5)


def test_the_prompt_s_spans_hold_the_needle_and_the_answer(tiny):
    lm, _ = tiny
    ids, needle, answer = build_prompt(lm.tokenizer, HAYSTACK, NEEDLE, QUESTION, ANSWER, 0.5)
    assert lm.tokenizer.decode(ids[needle[0]:needle[1]]).strip() == NEEDLE
    assert lm.tokenizer.decode(ids[answer[0]:answer[1]]) == ANSWER
    assert answer[1] == len(ids)


def _plain_copies(plain, ids, needle, answer):
    """copies [layers, heads, A] and log p(answer), from output_attentions of a plain eager model."""
    with torch.no_grad():
        out = plain(torch.tensor([ids]), output_attentions=True)
    rows = np.arange(answer[0] - 1, answer[1] - 1)
    targets = np.asarray(ids[answer[0]:answer[1]])
    in_needle = np.isin(targets, ids[needle[0]:needle[1]])
    copies = []
    for att in out.attentions:
        top = att[0].numpy()[:, rows].argmax(-1)  # [H, A]
        copies.append((top >= needle[0]) & (top < needle[1]) & (np.asarray(ids)[top] == targets) & in_needle)
    log_probs = torch.log_softmax(out.logits[0].double(), -1)
    return np.array(copies), in_needle, float(sum(log_probs[r, ids[r + 1]] for r in rows))


@pytest.mark.parametrize("depth", [0.0, 0.5, 1.0])
def test_retrieval_scores_equal_those_of_a_plain_model(tiny, depth):
    lm, plain = tiny
    result = retrieval_scores(lm, HAYSTACK, NEEDLE, QUESTION, ANSWER, depth)
    copies, in_needle, log_p = _plain_copies(plain, result.token_ids, result.needle_span, result.answer_span)
    np.testing.assert_array_equal(result.copies, copies)
    np.testing.assert_allclose(result.scores, copies.sum(-1) / in_needle.sum())
    assert result.answer_log_probability == pytest.approx(log_p, abs=1e-4)


def test_some_head_of_the_tiny_model_copies_so_the_comparison_means_something(tiny):
    lm, _ = tiny
    hits = sum(retrieval_scores(lm, HAYSTACK, NEEDLE, QUESTION, ANSWER, d).copies.sum() for d in (0.0, 0.5, 1.0))
    assert hits > 0


def test_knocking_heads_out_equals_zeroing_their_slice_on_a_plain_model(tiny):
    lm, plain = tiny
    result = retrieval_scores(lm, HAYSTACK, NEEDLE, QUESTION, ANSWER, 0.5)
    heads = [(1, 0), (2, 3)]
    d = plain.config.hidden_size // plain.config.num_attention_heads

    handles = [plain.model.layers[layer].self_attn.o_proj.register_forward_pre_hook(
                   zero_heads_hook([h for l2, h in heads if l2 == layer], d))
               for layer in {layer for layer, _ in heads}]
    try:
        _, _, expected = _plain_copies(plain, result.token_ids, result.needle_span, result.answer_span)
    finally:
        for handle in handles:
            handle.remove()
    got = answer_log_probability(lm, result.token_ids, result.answer_span, heads)
    assert got == pytest.approx(expected, abs=1e-4)
    assert got != pytest.approx(result.answer_log_probability, abs=1e-6)


def test_an_answer_absent_from_the_needle_is_a_sentence(tiny):
    lm, _ = tiny
    with pytest.raises(AnalysisError, match="needle"):
        retrieval_scores(lm, HAYSTACK, "Hi.", QUESTION, " zzz", 0.0)


def test_top_and_random_heads_do_not_overlap():
    scores = np.array([[0.1, 0.9, 0.0], [0.5, 0.0, 0.7]])
    top, random = top_and_random_heads(scores, 2)
    assert top == [(0, 1), (1, 2)]
    assert len(random) == 2 and not set(random) & set(top)


def test_the_bundled_haystack_is_cut_at_a_sentence_end_within_the_length(tiny):
    from core.attention_heads.retrieval import bundled_haystack, haystack_of_length

    lm, _ = tiny
    text = bundled_haystack()
    assert text.startswith("CHAPTER I. Down the Rabbit-Hole") and "#" not in text[:200]
    for tokens in (16, 40, 300):
        cut = haystack_of_length(lm.tokenizer, text, tokens)
        assert text.startswith(cut) and cut[-1] in ".!?"
        assert len(lm.tokenizer(cut, add_special_tokens=False)["input_ids"]) <= tokens
        # the next sentence end would not fit
        following = min(i + 1 for i in range(len(cut), len(text)) if text[i] in ".!?" and (i + 1 == len(text) or text[i + 1].isspace()))
        assert len(lm.tokenizer(text[:following], add_special_tokens=False)["input_ids"]) > tokens
    with pytest.raises(AnalysisError):
        haystack_of_length(lm.tokenizer, text, 1)


def test_the_model_s_answer_is_the_plain_model_s_greedy_generation(tiny):
    from core.attention_heads.retrieval import contains_answer, model_answer

    lm, plain = tiny
    result = retrieval_scores(lm, HAYSTACK, NEEDLE, QUESTION, ANSWER, 0.5)
    with torch.no_grad():
        out = plain.generate(torch.tensor([result.prompt_ids]), max_new_tokens=6, do_sample=False,
                             pad_token_id=lm.tokenizer.eos_token_id)
    expected = lm.tokenizer.decode(out[0, len(result.prompt_ids):], skip_special_tokens=True,
                                   clean_up_tokenization_spaces=False)
    assert model_answer(lm, result.prompt_ids, steps=6) == expected
    assert result.prompt_ids == result.token_ids[:result.answer_span[0]]
    assert contains_answer(" The Purple basil.", "purple basil ") and not contains_answer("purple", "purple basil")


def test_the_depth_length_grid_s_cells_equal_single_retrieval_runs(tiny):
    """Each cell of the grid is the answer's probability that retrieval_scores gives on that depth and length, and
    "top everywhere" is the plain model's own argmax at every answer token."""
    from core.attention_heads.retrieval import answer_success, bundled_haystack, depth_length_grid, haystack_of_length

    lm, plain = tiny
    haystacks = {n: haystack_of_length(lm.tokenizer, bundled_haystack(), n) for n in (16, 32)}
    seen = []
    grid = depth_length_grid(lambda d, n: answer_success(lm, haystacks[n], NEEDLE, QUESTION, ANSWER, d),
                             (0.0, 0.5, 1.0), (16, 32), progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (6, 6) and len(seen) == 6
    assert grid.measured.all()
    for column, n in enumerate((16, 32)):
        for row, depth in enumerate((0.0, 0.5, 1.0)):
            single = retrieval_scores(lm, haystacks[n], NEEDLE, QUESTION, ANSWER, depth)
            assert grid.probability[row, column] == pytest.approx(single.answer_probability, rel=1e-4)
            assert grid.prompt_tokens[row, column] == len(single.prompt_ids)
            ids = single.token_ids
            with torch.no_grad():
                logits = plain(torch.tensor([ids])).logits[0]
            rows = range(single.answer_span[0] - 1, single.answer_span[1] - 1)
            assert grid.top[row, column] == all(int(logits[r].argmax()) == ids[r + 1] for r in rows)


def test_a_cell_not_measured_stays_empty_in_the_grid():
    from core.attention_heads.retrieval import AnswerSuccess, depth_length_grid

    grid = depth_length_grid(lambda d, n: AnswerSuccess(-1.0, True, n) if n == 16 else None, (0.0, 1.0), (16, 32))
    assert grid.measured.tolist() == [[True, False], [True, False]]
    assert np.isnan(grid.probability[:, 1]).all() and grid.probability[0, 0] == pytest.approx(np.exp(-1.0))
