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


def test_needle_goes_to_a_sentence_end_near_the_depth_else_between_two_words():
    # 300 characters: a sentence ends at 10 and 150 (just after its "."), then one long sentence to the end
    text = "Six words." + (" ab cd" * 24)[:139] + "." + " ef gh" * 25
    assert len(text) == 300 and text[149] == "." and text[9] == "."
    assert needle_cut(text, 0.0) == 0
    assert needle_cut(text, 1.0) == len(text)
    assert needle_cut(text, 0.04) == 10  # 12 is 2 characters from the end of "Six words.": within 3 % (9 characters)
    assert needle_cut(text, 0.49) == 150  # 147: 3 from the sentence end at 150
    for depth in (0.25, 0.75):  # no sentence end within 9 characters of 75 or 225: between two words
        cut = needle_cut(text, depth)
        assert abs(cut - depth * len(text)) <= 3, (depth, cut)
        assert text[cut] == " " and text[cut - 1] != " "
    with pytest.raises(AnalysisError):
        needle_cut(text, 1.5)


@pytest.mark.integration
def test_on_smollm2_s_256_token_haystack_each_depth_puts_the_needle_near_it(bundled_lm):
    """Issue 50, item 1: the bundled text cut to 256 SmolLM2 tokens has three sentence ends; 25 % and 50 % both put
    the needle after "CHAPTER I." (token 4 of about 200). Now each depth lands within 5 % of the haystack's tokens of
    the depth asked, counted on the haystack tokenised whole, and no two depths share a place."""
    from core.attention_heads.retrieval import DEFAULT_ANSWER, DEFAULT_NEEDLE, DEFAULT_QUESTION, bundled_haystack, haystack_of_length

    tokenizer = bundled_lm.tokenizer
    haystack = haystack_of_length(tokenizer, bundled_haystack(), 256)
    whole = len(tokenizer(haystack, add_special_tokens=False)["input_ids"])
    prefix = len(tokenizer("", add_special_tokens=True)["input_ids"])
    starts = []
    for depth in (0.0, 0.25, 0.5, 0.75, 1.0):
        prompt = build_prompt(tokenizer, haystack, DEFAULT_NEEDLE, DEFAULT_QUESTION, DEFAULT_ANSWER, depth)
        before = prompt.needle_span[0] - prefix
        assert abs(before - depth * whole) <= 0.05 * whole, (depth, before, whole)
        assert prompt.depth == pytest.approx(before / whole, abs=0.02)
        starts.append(prompt.needle_span[0])
    assert len(set(starts)) == 5, starts


def test_the_prompt_s_spans_hold_the_needle_and_the_answer(tiny):
    lm, _ = tiny
    prompt = build_prompt(lm.tokenizer, HAYSTACK, NEEDLE, QUESTION, ANSWER, 0.5)
    ids, needle, answer = prompt.token_ids, prompt.needle_span, prompt.answer_span
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
    top, random, only_silent = top_and_random_heads(scores, 2)
    assert top == [(0, 1), (1, 2)]
    assert len(random) == 2 and not set(random) & set(top)
    assert only_silent and set(random) == {(0, 2), (1, 1)}  # the two heads that copy nothing


def test_random_control_heads_are_drawn_from_heads_that_copy_nothing():
    """Issue 50, item 9: a random head could score too (L18H7 at 0.67 in one draw). Half the heads of this grid score
    above 0 without being in the top 3; no draw of any seed takes one of them."""
    scores = np.zeros((6, 8))
    scores[::2] = np.linspace(0.05, 0.9, 32).reshape(4, 8)[:3]  # layers 0, 2, 4 score, layer 4 the most
    silent = {(int(l), int(h)) for l, h in zip(*np.nonzero(scores == 0), strict=True)}
    for seed in range(20):
        top, random, only_silent = top_and_random_heads(scores, 3, seed=seed)
        assert only_silent and len(random) == 3 and set(random) <= silent, (seed, random)
    # fewer silent heads than asked for: every head not in the top, and the flag says so
    top, random, only_silent = top_and_random_heads(np.array([[0.0, 0.2, 0.5, 0.9]]), 2)
    assert top == [(0, 3), (0, 2)] and not only_silent and len(random) == 2 and not set(random) & set(top)


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
    assert model_answer(lm, result.prompt_ids, steps=6).text == expected
    assert result.prompt_ids == result.token_ids[:result.answer_span[0]]
    assert contains_answer(" The Purple basil.", "purple basil ") and not contains_answer("purple", "purple basil")


def test_the_model_writes_at_least_as_many_tokens_as_the_expected_answer_has(tiny):
    """Issue 50, item 15: a 14-token Arabic answer was judged from 12 generated tokens. The model may write as many
    tokens as the expected answer has and a few more, and writes what generate writes with that many; when it stops
    before the answer's length, it is at its own end-of-text token (``cut`` False)."""
    from core.attention_heads.retrieval import answer_steps, model_answer

    lm, plain = tiny
    result = retrieval_scores(lm, HAYSTACK, NEEDLE, QUESTION, ANSWER, 0.5)
    for answer_tokens in (2, 14, 20):
        written = model_answer(lm, result.prompt_ids, answer_tokens)
        assert answer_steps(answer_tokens) >= answer_tokens + 1
        assert written.tokens >= answer_tokens or not written.cut
        with torch.no_grad():
            out = plain.generate(torch.tensor([result.prompt_ids]), max_new_tokens=answer_steps(answer_tokens),
                                 do_sample=False, pad_token_id=lm.tokenizer.eos_token_id)
        new = out[0, len(result.prompt_ids):].tolist()
        assert written.tokens == len(new)
        assert written.cut == (new[-1] != lm.tokenizer.eos_token_id)


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
            assert grid.needle_start[row, column] == single.needle_span[0]
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
