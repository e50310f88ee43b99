"""Readable labels for tokens, shared by every figure and table."""

from __future__ import annotations

from core.inference import Analysis


def token_labels(analysis: Analysis) -> list[str]:
    """One readable label per token, from the token's own span of the text.

    Spans work for every tokenizer (WordPiece, byte-level BPE, SentencePiece):
    GPT-2's ``Ġbank`` shows as ``bank``, an emoji split into byte pieces shows
    as the emoji. A piece that continues the previous token's word gets a
    ``##`` prefix, whatever the tokenizer's own convention. Special tokens
    keep their own name ([CLS], <|endoftext|>). Labels may repeat.
    """
    labels: list[str] = []
    previous_word: int | None = None
    for i, (start, end) in enumerate(analysis.offsets):
        word = analysis.word_ids[i]
        if analysis.special_mask[i] or end <= start:
            label = analysis.tokens[i]
        else:
            label = analysis.text[start:end].strip() or "␣"  # a token of only white space
            if word is not None and word == previous_word:
                label = "##" + label
        labels.append(label)
        previous_word = word
    return labels


def unique_labels(labels: list[str]) -> list[str]:
    """Labels made unique by their position where a label repeats (``the·2``)."""
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    return [f"{label}·{i}" if counts[label] > 1 else label for i, label in enumerate(labels)]
