"""Attention matrices as the views show them: special tokens shown, hidden or renormalised; word level.
Also attention rollout, norm-weighted attention, and the most-attended token of every token.

Every function takes matrices whose last two axes are ``[T queries, T keys]`` (any leading
axes, e.g. ``[layers, heads, T, T]``) and returns the new matrices with their labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from core.attention_heads.inside_head import check_supported, value_norms
from core.model.analysis import Analysis
from core.model.attention_layers import SINGLE_STACK
from core.model.models import LoadedModel
from core.model.tokens import token_labels

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


def row_normalise(matrices: np.ndarray) -> np.ndarray:
    """``[..., n, n]`` with every row rescaled to sum to 1 (rows that sum to 0 stay 0)."""
    sums = matrices.sum(axis=-1, keepdims=True)
    return np.divide(matrices, sums, out=np.zeros_like(matrices), where=sums > 0)



def layer_panels(attentions: np.ndarray, weighted: np.ndarray | None, rolled: np.ndarray | None, layer: int,
                 head: int | None) -> dict[str, np.ndarray]:
    """Maxima's three maps of one layer, each ``[T, T]`` under its title: raw attention (``attentions``
    ``[L, H, T, T]``), norm-weighted attention rescaled to a share of each row (``weighted``, same shape) and the
    rollout up to that layer (``rolled`` ``[L, T, T]``), the last two where given; ``head`` one head, or None for
    the mean over heads (rollout has already averaged them)."""
    def pick(matrices: np.ndarray) -> np.ndarray:
        return matrices[layer, head] if head is not None else matrices[layer].mean(axis=0)

    panels = {f"raw attention, layer {layer}": pick(attentions)}
    if weighted is not None:
        panels[f"norm-weighted, layer {layer} (share of row)"] = row_normalise(pick(weighted))
    if rolled is not None:
        panels[f"rollout, layers 0–{layer}"] = rolled[layer]
    return panels

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
        m = row_normalise(m)
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
    groups = word_groups(analysis)  # consecutive runs of positions covering 0..T-1 in order
    starts = [positions[0] for positions in groups]
    sizes = np.array([len(positions) for positions in groups], dtype=m.dtype)
    summed_keys = np.add.reduceat(m, starts, axis=-1)  # [..., T, W]
    merged = np.add.reduceat(summed_keys, starts, axis=-2) / sizes[:, None]  # [..., W, W]
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


def window_hidden(view: AttentionView, windows: tuple[int | None, ...] | None) -> np.ndarray | None:
    """bool ``[layers, n, n]``: True where layer ``l``'s sliding window hides every token of the key unit from every
    token of the query unit (a query at ``i`` sees keys ``j > i - w``), or None when no layer has a window.

    Those weights are exactly 0 because the model masked them, not because the head chose to look away; the views
    draw them as masked cells. ``windows`` is ``Analysis.sliding_windows``.
    """
    if windows is None or all(w is None for w in windows):
        return None
    first = np.array([min(p) for p in view.positions])
    last = np.array([max(p) for p in view.positions])
    gap = first[:, None] - last[None, :]  # the smallest distance back from a query unit to a key unit
    return np.stack([gap >= w if w is not None else np.zeros(gap.shape, dtype=bool) for w in windows])


# --- One head or one layer: the stored weights, or the text's trace (core.model.trace) ---


def layer_attention(model: LoadedModel, analysis: Analysis, layer: int, heads: list[int] | None = None) -> np.ndarray:
    """float32 ``[len(heads), T, T]`` (all heads when None) of block ``layer``: the stored weights, or read from the
    analysis's trace (``Analysis.trace``, ``core.model.trace.Trace.attention``), equal to the model's own in both."""
    if not 0 <= layer < analysis.num_layers:
        raise ValueError(f"layer must be in 0..{analysis.num_layers - 1}, got {layer}")
    if analysis.model_name != model.name:
        raise ValueError(f"this analysis was made with {analysis.model_name}, not {model.name}")
    if analysis.attentions is not None:
        chosen = analysis.attentions[layer] if heads is None else analysis.attentions[layer, list(heads)]
        return np.asarray(chosen, dtype=np.float32)
    if analysis.trace is None:
        raise ValueError("this Analysis was computed without attentions")
    return analysis.trace.attention(SINGLE_STACK, layer, heads)


def head_attention(model: LoadedModel, analysis: Analysis, layer: int, head: int) -> np.ndarray:
    """float32 ``[T, T]``: head ``head`` of block ``layer``, exactly the model's own weights (row = query, column =
    key; sliding window, soft-cap, masks and shared key/value heads included), stored or read from the trace."""
    if not 0 <= head < analysis.num_heads:
        raise ValueError(f"head must be in 0..{analysis.num_heads - 1}, got {head}")
    return layer_attention(model, analysis, layer, [head])[0]


# --- Beyond raw attention: rollout (Abnar & Zuidema 2020), norm-weighted (Kobayashi et al. 2020) ---


def rollout(analysis: Analysis) -> np.ndarray:
    """Attention rollout, float64 ``[layers, T, T]`` (Abnar & Zuidema 2020); every row sums to 1.

    Per layer: average the heads, add the residual connection as ``0.5·A + 0.5·I`` and
    renormalise the rows, giving ``Â_l``. Then multiply through the layers:
    ``result[l] = Â_l · … · Â_1`` (``result[0]`` is the first block alone), so
    ``result[l][i, j]`` is how much of token ``j``'s input reaches token ``i`` after block ``l + 1``.
    """
    if analysis.attentions is None:
        raise ValueError("this Analysis was computed without attentions")
    mixed = row_normalise(0.5 * analysis.attentions.mean(axis=1, dtype=np.float64) + 0.5 * np.eye(analysis.num_tokens))
    result = np.empty_like(mixed)
    current = np.eye(analysis.num_tokens)
    for layer, matrix in enumerate(mixed):
        current = matrix @ current
        result[layer] = current
    return result


def norm_weighted(model: LoadedModel, analysis: Analysis) -> np.ndarray:
    """Norm-weighted attention ``[layers, heads, T, T]`` (Kobayashi et al. 2020).

    ``result[l, h, i, j] = α[l, h, i, j] · ‖f_h(x_j)‖``, where ``f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h``
    is token ``j``'s value vector passed through head ``h``'s slice of the output projection:
    the length of what ``j`` actually adds to ``i``. Rows no longer sum to 1.
    float32, like ``analysis.attentions``. Raises ``core.attention_heads.inside_head.UnsupportedArchitecture`` for
    models ``core.attention_heads.inside_head`` cannot take apart.
    """
    if analysis.attentions is None:
        raise ValueError("this Analysis was computed without attentions")
    check_supported(model)
    result = np.empty(analysis.attentions.shape, dtype=np.float32)
    for layer in range(analysis.num_layers):  # one layer's float64 product at a time, not every layer's at once
        norms = value_norms(model, analysis, layer)  # [heads, T keys]
        np.multiply(analysis.attentions[layer].astype(np.float64), norms[:, None, :], out=result[layer], casting="same_kind")
    return result


# --- Token-to-token maxima: which unit each unit attends to most, layer by layer ---

HeadReduction = Literal["max", "mean"] | int


def reduce_heads(matrices: np.ndarray, heads: HeadReduction) -> np.ndarray:
    """``[layers, heads, n, n]`` → ``[layers, n, n]``: ``"max"`` or ``"mean"`` over heads, or one head (0-based)."""
    if heads == "max":
        return matrices.max(axis=1)
    if heads == "mean":
        return matrices.mean(axis=1)
    if isinstance(heads, (int, np.integer)) and not isinstance(heads, bool) and 0 <= heads < matrices.shape[1]:
        return matrices[:, int(heads)]
    raise ValueError(f"heads must be 'max', 'mean' or a head in 0..{matrices.shape[1] - 1}, got {heads!r}")


@dataclass(frozen=True)
class Maxima:
    """For each layer and each query unit shown: the key unit it attends to most.

    ``labels``: the ``n`` unit labels (tokens or words, special ones included).
    ``queries``: int ``[q]``, the unit indices of the queries shown (special ones left out when skipped).
    ``targets``: int ``[layers, q]``, the unit index each query attends to most.
    ``weights``: ``[layers, q]``, that maximal weight (after the head reduction).
    Distances ``targets - queries`` count units (tokens or words), special ones included.
    """

    labels: list[str]
    queries: np.ndarray
    targets: np.ndarray
    weights: np.ndarray

    @property
    def distances(self) -> np.ndarray:
        """int ``[layers, q]``: target position − query position (negative = to the left)."""
        return self.targets - self.queries[None, :]

    def long_table(self) -> pd.DataFrame:
        """One row per (layer, query); ``layer`` counts blocks from 0 (block l produces hidden state l + 1)."""
        layers, q = self.targets.shape
        return pd.DataFrame(
            {
                "layer": np.repeat(np.arange(layers), q),
                "query_position": np.tile(self.queries, layers),
                "query": [self.labels[i] for i in self.queries] * layers,
                "target_position": self.targets.ravel(),
                "target": [self.labels[i] for i in self.targets.ravel()],
                "weight": self.weights.ravel(),
                "distance": self.distances.ravel(),
            }
        )

    def wide_table(self) -> pd.DataFrame:
        """Rows = queries, one column per layer (from 0) holding ``target (weight)``."""
        table = pd.DataFrame({"position": self.queries, "token": [self.labels[i] for i in self.queries]})
        for layer, (targets, weights) in enumerate(zip(self.targets, self.weights)):
            table[f"layer {layer}"] = [f"{self.labels[t]} ({w:.2f})" for t, w in zip(targets, weights)]
        return table

    def layer_summary(self) -> pd.DataFrame:
        """Per layer (from 0): how many distinct targets, the share of queries whose target is
        within one position (``local_share``), and the most frequent target with its share."""
        rows = []
        for layer, (targets, distances) in enumerate(zip(self.targets, self.distances)):
            values, counts = np.unique(targets, return_counts=True)
            top = int(np.argmax(counts)) if len(counts) else None
            rows.append(
                {
                    "layer": layer,
                    "distinct_targets": len(values),
                    "local_share": float(np.mean(np.abs(distances) <= 1)) if len(distances) else float("nan"),
                    "most_frequent_target": self.labels[values[top]] if top is not None else "",
                    "its_share": float(counts[top] / counts.sum()) if top is not None else float("nan"),
                }
            )
        return pd.DataFrame(rows)


def attention_maxima(
    analysis: Analysis,
    *,
    matrices: np.ndarray | None = None,
    heads: HeadReduction = "max",
    skip_special: bool = True,
    words: bool = False,
) -> Maxima:
    """The most-attended key of every query, for every layer of ``matrices`` ``[layers, heads, T, T]``.

    Default: the analysis's attentions, maximum over heads, then argmax over keys (ties: the
    leftmost key). ``words``: merge to words first (``merge_words``), then reduce heads.
    ``skip_special``: special tokens (by the tokenizer's mask, never by position) are neither
    queries nor targets.
    """
    m = analysis.attentions if matrices is None else matrices
    view = attention_view(analysis, matrices=m, words=words)
    reduced = reduce_heads(view.matrices, heads)  # [layers, n, n]
    queries = np.flatnonzero(~view.special) if skip_special else np.arange(len(view.labels))
    scores = np.array(reduced[:, queries, :], dtype=np.float64)
    if skip_special:
        scores[..., view.special] = -np.inf
    targets = scores.argmax(axis=-1) if len(queries) else np.zeros((len(reduced), 0), dtype=int)
    weights = np.take_along_axis(reduced[:, queries, :], targets[..., None], axis=-1)[..., 0]
    return Maxima(view.labels, queries, targets, weights)


def top_attended(
    analysis: Analysis, layer: int, *, head: int | None = None, skip_special: bool = True
) -> list[tuple[str, str, float]]:
    """``(token, most-attended token, weight)`` for every query token of block ``layer`` (0-based).

    ``head=None``: maximum over heads, then argmax over keys; else that head (0-based).
    ``skip_special``: special tokens are neither queries nor targets (by the tokenizer's mask).
    """
    if not 0 <= layer < analysis.num_layers:
        raise ValueError(f"layer must be in 0..{analysis.num_layers - 1}, got {layer}")
    found = attention_maxima(
        analysis,
        matrices=analysis.attentions[layer : layer + 1],
        heads="max" if head is None else head,
        skip_special=skip_special,
    )
    return [
        (found.labels[q], found.labels[t], float(w))
        for q, t, w in zip(found.queries, found.targets[0], found.weights[0])
    ]


def special_share(matrices: np.ndarray, special: np.ndarray) -> np.ndarray:
    """``[layers]``: of each non-special query's row total, the share on special keys; mean over heads and queries.

    ``matrices``: ``[layers, heads, T, T]`` (raw or norm-weighted); ``special``: bool ``[T]``.
    NaN when there is no special or no non-special token.
    """
    if not special.any() or special.all():
        return np.full(matrices.shape[0], np.nan)
    rows = np.asarray(matrices[:, :, ~special, :], dtype=np.float64)
    totals = rows.sum(axis=-1)
    share = np.divide(rows[..., special].sum(axis=-1), totals, out=np.zeros_like(totals), where=totals > 0)
    return share.mean(axis=(1, 2))


def pairs_table(labels: list[str], matrices: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per (query, key) with a column per named ``[n, n]`` matrix (a figure's CSV)."""
    n = len(labels)
    queries, keys = np.divmod(np.arange(n * n), n)
    table = pd.DataFrame(
        {
            "query_position": queries,
            "query": [labels[i] for i in queries],
            "key_position": keys,
            "key": [labels[j] for j in keys],
        }
    )
    for name, matrix in matrices.items():
        table[name] = np.asarray(matrix).ravel()
    return table
