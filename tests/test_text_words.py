"""Issue 50 item 6: words are found from the text itself, the same way for every tokenizer.

Gemma 3's SentencePiece tokenizer reports one word for the whole text (``word_ids()`` = ``[None, 0, 0, …]``), so
Compare, Drift and the word-level views found no words on it. ``core.model.words.text_word_ids`` reads words from the
tokens' spans and the characters between them; these tests check it by hand and on every bundled model against the
words a plain regular expression finds in the same text.
"""

from __future__ import annotations

import re

import pytest

from core.attention_heads.attention import merge_words
from core.model.inference import analyze
from core.model.words import text_word_ids
from core.representations.compare import shared_words, words
from core.representations.contextuality import contextuality

BANK_RIVER = "She sat on the grassy bank of the stream."
BANK_MONEY = "He deposited his salary at the bank on Monday."
WATER = [
    "The river carried water to the lake, and the lake gave its water back to the river.",
    "Water from the lake fed the river; the river took the water far from the lake.",
    "A river of water ran into the lake. The lake held the water of every river.",
    "By the lake the river water was cold, and the lake kept the river water still.",
]
BUNDLED = ["bundled", "bundled_lm", "bundled_gemma"]  # MiniLM WordPiece, SmolLM2 byte-level BPE, Gemma 3 SentencePiece


def test_sentencepiece_spans_give_one_word_per_space_and_punctuation_apart():
    """Spans as Gemma 3 gives them: "▁bank" without its space, a byte-split emoji sharing one character."""
    text = "a grassy bank. 🙂x"
    offsets = [(0, 0), (0, 1), (2, 5), (5, 8), (9, 13), (13, 14), (15, 16), (15, 16), (16, 17)]
    special = [True] + [False] * 8
    assert text_word_ids(text, offsets, special) == [None, 0, 1, 1, 2, 3, 4, 4, 5]


def test_a_space_inside_a_span_or_a_gap_starts_a_word():
    text = "on the\nbank"
    # byte-level spans: the space travels with the token after it; the newline is a token of its own
    assert text_word_ids(text, [(0, 2), (2, 6), (6, 7), (7, 11)], [False] * 4) == [0, 1, 2, 3]


@pytest.mark.integration
@pytest.mark.parametrize("fixture", BUNDLED)
def test_every_bundled_model_finds_the_words_of_the_text(fixture, request):
    model = request.getfixturevalue(fixture)
    text = "The stream's banks, after the rain, were grassy and wet."
    found = [word for word, _ in words(analyze(model, text))]
    assert found == [w for w in re.findall(r"\w+", text.lower())] or found == [
        w for w in re.findall(r"'?\w+", text.lower())]  # byte-level BPE keeps "'s" as one word, as GPT-2 does


@pytest.mark.integration
@pytest.mark.parametrize("fixture", BUNDLED)
def test_compare_finds_the_shared_words_on_every_bundled_model(fixture, request):
    model = request.getfixturevalue(fixture)
    assert shared_words(analyze(model, BANK_RIVER), analyze(model, BANK_MONEY)) == ["on", "the", "bank"]


@pytest.mark.integration
@pytest.mark.parametrize("fixture", BUNDLED)
def test_drift_finds_the_repeated_words_on_every_bundled_model(fixture, request):
    model = request.getfixturevalue(fixture)
    measured = set(contextuality(model, WATER).words["word"])
    assert {"water", "river", "lake"} <= measured


@pytest.mark.integration
@pytest.mark.parametrize("fixture", BUNDLED)
def test_word_level_attention_has_one_label_per_word(fixture, request):
    model = request.getfixturevalue(fixture)
    analysis = analyze(model, BANK_RIVER)
    labels = [label for label, special in zip(merge_words(analysis).labels, merge_words(analysis).special) if not special]
    assert labels == re.findall(r"\w+|[^\w\s]", BANK_RIVER)
