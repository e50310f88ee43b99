"""The needle-in-a-haystack page in AppTest: a tiny random Llama (its window is 64 tokens, so a short haystack) and,
as an integration test, SmolLM2-135M-Instruct, its sentences checked against core.attention_heads.retrieval run directly."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from tests.lm_factory import build_tiny_llama_lm
from tests.test_app import open_app, page_errors

pytestmark = pytest.mark.app
PAGE = "app_pages/needle.py"
HOSTILE = "<script>alert(1)</script> \"><img src=x onerror=alert(1)>"
TINY = {"needle": "The code is cat mat.", "question": "Code?", "answer": "cat mat", "length": "16", "depth": "50"}


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return str(build_tiny_llama_lm(tmp_path_factory.mktemp("needle") / "llama", layers=3))


def _text(at) -> str:
    shown = "\n".join(m.value for m in at.markdown) + "\n" + "\n".join(c.value for c in at.caption)
    return shown.replace("\\", "")  # markdown escapes, as the reader sees the text


def test_tiny_llama_draws_the_grid_the_answer_and_the_knock_out(llama_dir):
    at = open_app({"model": llama_dir, **TINY}, page=PAGE)
    assert not page_errors(at)
    text = _text(at)
    assert "the model's greedy answer is" in text
    assert "Alice's Adventures in Wonderland" in text and "public domain" in text
    assert [c.key for c in at.get("plotly_chart") if c.key] == ["needle-scores"]
    assert "Before any knock-out the answer's probability is" in text or "No head scored above 0" in " ".join(
        i.value for i in at.info)


def _direct(model_dir: str, length: int, needle: str, question: str, answer: str, depth: float):
    """core.attention_heads.retrieval run directly (no page, no cache): scores, the answer's log-probability and the knock-outs."""
    from core.attention_heads.retrieval import answer_log_probability, bundled_haystack, haystack_of_length, retrieval_scores, top_and_random_heads
    from core.model.models import load_model
    from core.outputs.predictions import load_language_model

    lm = load_language_model(load_model(model_dir))
    haystack = haystack_of_length(lm.tokenizer, bundled_haystack(), length)
    result = retrieval_scores(lm, haystack, needle, question, answer, depth)
    count = min(5, int((result.scores > 0).sum()))
    top, random, _ = top_and_random_heads(result.scores, count)
    after = [answer_log_probability(lm, result.token_ids, result.answer_span, heads) for heads in (top, random)]
    return result, count, top, random, after


def _scores_grid(at) -> np.ndarray:
    """The z of the retrieval-score heatmap as drawn (Plotly sends arrays as base64 typed arrays)."""
    import base64
    import json

    z = json.loads(next(c for c in at.get("plotly_chart") if c.key == "needle-scores").proto.spec)["data"][0]["z"]
    if isinstance(z, dict):
        shape = [int(n) for n in str(z["shape"]).split(",")]
        return np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).reshape(shape)
    return np.array(z, dtype=float)


def test_tiny_llama_s_sentences_hold_the_numbers_of_core_retrieval(llama_dir):
    from core.maths.numbers import probability

    at = open_app({"model": llama_dir, **TINY, "length": "32", "depth": "0"}, page=PAGE)
    assert not page_errors(at)
    text = _text(at)
    result, count, top, random, (after_top, after_random) = _direct(llama_dir, 32, TINY["needle"], TINY["question"],
                                                                     TINY["answer"], 0.0)
    np.testing.assert_allclose(_scores_grid(at), result.scores)
    assert f"After {len(result.token_ids) - 2:,} tokens" in text  # the answer "cat mat" is 2 tokens of the prompt read
    assert f"has probability {probability(result.answer_probability)}" in text
    scoring = int((result.scores > 0).sum())
    assert f"{scoring} of the {result.scores.size} heads copied" in text
    assert count > 0, "the tiny model copies nothing: the knock-out is not shown"
    assert (f"top {count} retrieval head(s) knocked out it is {probability(math.exp(after_top))}, with {count} random "
            f"head(s) {probability(math.exp(after_random))}") in text
    # the top heads by numpy by hand: highest score first, ties by position
    flat = sorted(range(result.scores.size), key=lambda i: (-result.scores.ravel()[i], i))[:count]
    codes = ", ".join(f"L{i // result.scores.shape[1]}H{i % result.scores.shape[1]}" for i in flat)
    assert f"Top retrieval heads: {codes}." in text
    silent = {(i // result.scores.shape[1], i % result.scores.shape[1]) for i in np.flatnonzero(result.scores == 0)}
    if len(silent) >= count:  # issue 50, item 9: random heads from those that copy nothing, and the caption says so
        assert set(random) <= silent
        assert f"from the {len(silent)} heads that copied nothing" in text
    # issue 50, item 5: the tiny model's 64-token window is below the page's 2,048: one limit, named as the app's
    assert "Lengths up to 32 tokens leave room for the needle, question and answer within the 64 tokens this app reads" in text


def test_hostile_needle_is_escaped_and_an_answer_not_in_the_needle_is_a_sentence(llama_dir):
    at = open_app({"model": llama_dir, **TINY, "needle": HOSTILE, "answer": "onerror"}, page=PAGE)
    assert not page_errors(at)
    shown = "\n".join(m.value for m in at.markdown)
    assert "greedy answer" in shown and "onerror" in shown
    for m in at.markdown:
        assert not re.search(r"(?<!\\)<(script|img)", m.value), m.value
    at = open_app({"model": llama_dir, **TINY, "answer": "sat on"}, page=PAGE)
    assert not page_errors(at)
    warning = " ".join(w.value for w in at.warning).replace("\\", "")
    assert "make the answer a phrase of the needle" in warning


def test_an_encoder_gets_a_sentence(tiny_bert_dir):
    at = open_app({"model": tiny_bert_dir}, page=PAGE)
    assert not page_errors(at)
    assert "not a causal language model" in " ".join(i.value for i in at.info)


def test_the_tiny_window_limits_the_lengths_offered(llama_dir):
    at = open_app({"model": llama_dir, **TINY}, page=PAGE)
    offered = at.select_slider[0].options
    assert offered[-1] == "32" and "64" not in offered  # 64 window − (needle, question, answer, spaces) < 64


@pytest.mark.integration
def test_smollm2_answers_the_default_needle_and_the_page_s_numbers_are_core_retrieval_s():
    """The page's defaults at 256 tokens, the needle at 50 %: SmolLM2 answers them (measured p ≈ 0.19), and every
    number the sentences state is the one core.attention_heads.retrieval gives when run directly."""
    from core.attention_heads.retrieval import DEFAULT_ANSWER, DEFAULT_NEEDLE, DEFAULT_QUESTION
    from core.maths.numbers import probability

    name = "SmolLM2-135M-Instruct"
    at = open_app({"model": name}, page=PAGE)
    assert not page_errors(at)
    text = _text(at)
    result, count, top, random, (after_top, after_random) = _direct(name, 256, DEFAULT_NEEDLE, DEFAULT_QUESTION, DEFAULT_ANSWER, 0.5)
    assert "it contains the expected answer “purple basil”" in text
    assert result.answer_probability > 0.05
    np.testing.assert_allclose(_scores_grid(at), result.scores)
    assert f"has probability {probability(result.answer_probability)}" in text
    assert f"{int((result.scores > 0).sum())} of the {result.scores.size} heads copied" in text
    assert (f"top {count} retrieval head(s) knocked out it is {probability(math.exp(after_top))}, with {count} random "
            f"head(s) {probability(math.exp(after_random))}") in text
    # issue 50, item 5: the page's own limit, and the app's, each named as what it is
    assert ("within this page's limit of 2,048 tokens (other pages read up to 8,192 with SmolLM2-135M-Instruct" in text)
    assert "of the app's limit" not in text and "this app's limit of 2,048" not in text


def test_the_depth_length_grid_holds_single_retrieval_runs(llama_dir):
    """Switched on, the grid measures 5 depths × the lengths offered (16 and 32 tokens in the tiny window); each
    drawn cell is the answer's probability of core.attention_heads.retrieval run directly on that depth and length."""
    from core.attention_heads.retrieval import bundled_haystack, haystack_of_length, retrieval_scores
    from core.model.models import load_model
    from core.outputs.predictions import load_language_model

    at = open_app({"model": llama_dir, **TINY, "grid": "true"}, page=PAGE)
    assert not page_errors(at), page_errors(at)
    drawn = _grid(at)
    lm = load_language_model(load_model(llama_dir))
    assert drawn.shape == (5, 2)
    for column, length in enumerate((16, 32)):
        haystack = haystack_of_length(lm.tokenizer, bundled_haystack(), length)
        for row, depth in enumerate((0.0, 0.25, 0.5, 0.75, 1.0)):
            single = retrieval_scores(lm, haystack, TINY["needle"], TINY["question"], TINY["answer"], depth)
            assert drawn[row, column] == pytest.approx(single.answer_probability, rel=1e-4)
    assert "cells measured the model ranks the expected answer first" in _text(at)


def _grid(at) -> np.ndarray:
    import base64
    import json

    z = json.loads(next(c for c in at.get("plotly_chart") if c.key == "needle-grid").proto.spec)["data"][0]["z"]
    if isinstance(z, dict):
        shape = [int(n) for n in str(z["shape"]).split(",")]
        return np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).reshape(shape)
    return np.array(z, dtype=float)
