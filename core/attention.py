"""Attention matrices as the views show them: special tokens shown, hidden or renormalised; word level.

Every function takes matrices whose last two axes are ``[T queries, T keys]`` (any leading
axes, e.g. ``[layers, heads, T, T]``) and returns the new matrices with their labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from core.inference import Analysis
from core.tokens import token_labels

SpecialTokens = Literal["show", "hide", "renormalise"]


@dataclass(frozen=True)
class AttentionView:
    """Matrices ``[..., n, n]`` over ``n`` units (tokens or words), with a label and a position list each.

    ``positions[i]``: the token positions unit ``i`` stands for (one for a token, several for a word).
    ``special``: bool ``[n]``, True for units that are special tokens.
    """

    matrices: np.ndarray
    labels: list[str]
    positions: list[list[int]]
    special: np.ndarray


def token_view(analysis: Analysis, matrices: np.ndarray | None = None) -> AttentionView:
    """The analysis's attentions (or ``matrices`` of the same token size), one unit per token."""
    m = analysis.attentions if matrices is None else matrices
    return AttentionView(m, token_labels(analysis), [[i] for i in range(analysis.num_tokens)], analysis.special_mask.copy())


def special_tokens(view: AttentionView, mode: SpecialTokens) -> AttentionView:
    """``show``: unchanged. ``hide``: drop special rows and columns (rows then sum to less than 1).
    ``renormalise``: drop them and rescale each row to sum to 1 again, as if the special
    tokens had not been there.
    """
    if mode == "show" or not view.special.any():
        return view
    if mode not in ("hide", "renormalise"):
        raise ValueError(f"unknown special-token mode {mode!r}")
    keep = np.flatnonzero(~view.special)
    m = view.matrices[..., keep, :][..., :, keep]
    if mode == "renormalise":
        sums = m.sum(axis=-1, keepdims=True)
        m = np.divide(m, sums, out=np.zeros_like(m), where=sums > 0)
    return AttentionView(
        np.ascontiguousarray(m),
        [view.labels[i] for i in keep],
        [view.positions[i] for i in keep],
        view.special[keep],
    )


def word_groups(analysis: Analysis) -> list[list[int]]:
    """Token positions grouped into words (by the tokenizer's word ids); each special token is its own group."""
    groups: list[list[int]] = []
    previous: int | None = None
    for i, word in enumerate(analysis.word_ids):
        if word is None or analysis.special_mask[i] or word != previous or not groups:
            groups.append([i])
        else:
            groups[-1].append(i)
        previous = None if (word is None or analysis.special_mask[i]) else word
    return groups


def merge_words(analysis: Analysis, matrices: np.ndarray | None = None) -> AttentionView:
    """Word-level attention: **sum over a word's key pieces, mean over its query pieces**.

    Summing keys keeps each row a distribution (rows still sum to 1); averaging queries
    gives the word's typical piece. Labels are the words as typed.
    """
    m = analysis.attentions if matrices is None else matrices
    groups = word_groups(analysis)
    t = analysis.num_tokens
    # [T, W] one-hot membership; keys: M @ S sums, queries: A^T-normalised mean
    member = np.zeros((t, len(groups)), dtype=m.dtype)
    for g, positions in enumerate(groups):
        member[positions, g] = 1.0
    summed_keys = m @ member  # [..., T, W]
    mean_queries = member.T / member.sum(axis=0)[:, None]  # [W, T]
    merged = np.einsum("wt,...tk->...wk", mean_queries, summed_keys)
    labels = []
    for positions in groups:
        first, last = positions[0], positions[-1]
        if analysis.special_mask[first] or analysis.offsets[first][1] <= analysis.offsets[first][0]:
            labels.append(analysis.tokens[first])
        else:
            labels.append(analysis.text[analysis.offsets[first][0] : analysis.offsets[last][1]].strip() or "␣")
    special = np.array([bool(analysis.special_mask[p[0]]) for p in groups])
    return AttentionView(np.ascontiguousarray(merged), labels, groups, special)


def attention_view(
    analysis: Analysis,
    *,
    matrices: np.ndarray | None = None,
    special: SpecialTokens = "show",
    words: bool = False,
) -> AttentionView:
    """The one entry point the views use: word merging first, then the special-token option."""
    view = merge_words(analysis, matrices) if words else token_view(analysis, matrices)
    return special_tokens(view, special)
