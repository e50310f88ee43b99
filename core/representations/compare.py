"""One word in two texts: does it get the same embedding in both?

A word's vector at hidden state ``k`` is the mean of its pieces' vectors (a word the tokenizer
splits into several tokens is mean-pooled over exactly those tokens). Hidden state 0 is the
embedding layer's output, which already contains the position embedding (and, for BERT, the
token-type embedding, then LayerNorm); the raw word-embedding lookup is compared separately.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from core.attention_heads.attention import word_groups
from core.maths.similarity import cosine
from core.model.analysis import Analysis
from core.model.inference import analyze_many
from core.model.models import LoadedModel

# Same sense of "bank" as core.teaching.examples.BANK_RIVER, different words: the compare page's default control.
SAME_SENSE_CONTROL = "The path follows the north bank of the river for two miles."


def words(analysis: Analysis) -> list[tuple[str, list[int]]]:
    """``(lower-cased word as typed, its token positions)`` for every word in text order.

    Words are the tokenizer's words (word ids) spelt from the character offsets; special tokens
    and words without a letter or digit (punctuation) are left out.
    """
    found = []
    for positions in word_groups(analysis):
        first, last = positions[0], positions[-1]
        start, end = analysis.offsets[first][0], analysis.offsets[last][1]
        if analysis.special_mask[first] or end <= start:
            continue
        word = analysis.text[start:end].strip().lower()
        if any(c.isalnum() for c in word):
            found.append((word, positions))
    return found


def shared_words(analysis_a: Analysis, analysis_b: Analysis) -> list[str]:
    """Words (case-insensitive, whole words) present in both texts, in the order of the first text."""
    in_b = {word for word, _ in words(analysis_b)}
    shared: list[str] = []
    for word, _ in words(analysis_a):
        if word in in_b and word not in shared:
            shared.append(word)
    return shared


def word_positions(analysis: Analysis, word: str) -> list[int]:
    """Token positions of the first occurrence of ``word`` (case-insensitive); ValueError if absent."""
    for candidate, positions in words(analysis):
        if candidate == word.lower():
            return positions
    raise ValueError(f"{word!r} is not a word of {analysis.text!r}")


def word_occurrences(analysis: Analysis, word: str) -> int:
    """How many times ``word`` occurs in the text (the comparison uses the first)."""
    return sum(candidate == word.lower() for candidate, _ in words(analysis))


def word_vectors(analysis: Analysis, word: str) -> np.ndarray:
    """``[layers + 1, hidden]``: the word's hidden state at every layer, mean over its pieces."""
    return analysis.hidden_states[:, word_positions(analysis, word)].mean(axis=1)


def word_similarity(analysis_a: Analysis, analysis_b: Analysis, word: str) -> pd.DataFrame:
    """Cosine similarity of ``word``'s contextual embeddings in the two analyses, at every hidden state.

    Columns ``layer`` (0 = embedding layer output, k = output of block k - 1 counting blocks from 0)
    and ``cosine_similarity``; ``layers + 1`` rows.
    """
    similarity = cosine(word_vectors(analysis_a, word), word_vectors(analysis_b, word))
    return pd.DataFrame({"layer": np.arange(len(similarity)), "cosine_similarity": similarity})


def word_similarity_by_layer(model: LoadedModel, text_a: str, text_b: str, word: str) -> pd.DataFrame:
    """``word_similarity`` straight from two texts (one batched forward pass)."""
    analysis_a, analysis_b = analyze_many(model, [text_a, text_b], attentions=False)
    return word_similarity(analysis_a, analysis_b, word)


def word_lookup(model: LoadedModel, analysis: Analysis, word: str) -> np.ndarray:
    """``[hidden]``: the word's raw word-embedding lookup (``get_input_embeddings()`` rows of its token ids,
    mean over pieces): no position, no context."""
    ids = torch.tensor([analysis.input_ids[p] for p in word_positions(analysis, word)], device=model.device)
    with torch.inference_mode():
        return model.model.get_input_embeddings()(ids).float().cpu().numpy().mean(axis=0)


def lookup_similarity(model: LoadedModel, analysis_a: Analysis, analysis_b: Analysis, word: str) -> float:
    """Cosine of the word's ``word_lookup`` in the two texts. 1.0 whenever the word became the
    same token ids in both texts."""
    return float(cosine(word_lookup(model, analysis_a, word), word_lookup(model, analysis_b, word)))


def word_attention(analysis: Analysis, word: str, layer: int, head: int) -> np.ndarray:
    """``[T]``: how much ``word`` (as query, mean over its pieces) attends to every token, in one head."""
    return analysis.attentions[layer, head][word_positions(analysis, word)].mean(axis=0)


def control_sentence(word: str, cross: float, control: float, layer: int) -> str:
    """How the A-vs-B cosine at hidden state ``layer`` reads against the A-vs-control cosine (same sense)."""
    difference = control - cross
    text = (
        f"At hidden state {layer}, “{word}” in A vs B: {cross:.3f}; A vs the control text: {control:.3f}. "
        "Any two contexts lower the cosine, so read A vs B against the control, not against 1"
    )
    if difference > 0.02:
        return text + f": the two texts differ by {difference:.3f} more than the control does."
    if difference < -0.02:
        return text + f": here A and B are {-difference:.3f} more alike than A and the control."
    return text + ": here the two are about equal, so this comparison shows no effect beyond a change of context."
