"""Words found from the text itself, the same way for every tokenizer.

A tokenizer's own word ids cannot be trusted across tokenizers: WordPiece and byte-level BPE split the text into
words before they split it into pieces, so their ``word_ids()`` are words; SentencePiece (Gemma 3's) has no such
split and reports one word for the whole text (``[None, 0, 0, …]``). Here a word is read from each token's span of
the text and the characters between tokens: a token starts a new word where a space separates it from the token
before (in the gap between their spans, or at the edge of either span), or where letters and digits meet anything
else (``stream`` | ``.``), as both WordPiece's and GPT-2's splits do. Tokens that share a character (parts of one
character's UTF-8 bytes) stay in one word. Special tokens and tokens without a span of the text belong to no word.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence


def _wordy(c: str) -> bool:
    """A letter, digit or combining mark (Arabic vowel signs, accents written apart): part of a word's body."""
    return c.isalnum() or unicodedata.category(c).startswith("M")


def text_word_ids(text: str, offsets: Sequence[tuple[int, int]], special: Sequence[bool]) -> list[int | None]:
    """For each token, the index of the word of ``text`` it belongs to (``None`` for a special token or a token
    with no span), numbered from 0 in text order; ``offsets`` are the tokens' ``(start, end)`` character spans."""
    ids: list[int | None] = []
    word = -1
    previous: tuple[int, int] | None = None  # the span of the last token that had one
    for (start, end), is_special in zip(offsets, special, strict=True):
        if is_special or end <= start:
            ids.append(None)
            previous = None
            continue
        piece = text[start:end]
        if previous is None or _starts_word(text, previous, start, piece):
            word += 1
        ids.append(word)
        previous = (start, end)
    return ids


def _starts_word(text: str, previous: tuple[int, int], start: int, piece: str) -> bool:
    before_start, before_end = previous
    if start < before_end:  # the two tokens share a character: parts of its bytes
        return False
    gap = text[before_end:start]
    before = text[before_start:before_end]
    if gap or piece[0].isspace() or before[-1].isspace():
        return True  # a space (or anything the tokenizer skipped) between them
    return _wordy(before[-1]) != _wordy(piece[0])
