"""The three attentions of an encoder-decoder as the views show them, and what cross-attention aligns.

Encoder and decoder self-attention are square (``core.attention_heads.attention.attention_view`` of
``PairAnalysis.source`` / ``.target``). Cross-attention is not: ``[L_dec, H, T, S]``, rows are
target (decoder) queries, columns source (encoder) keys. The same options apply: special tokens
shown / hidden / renormalised (target rows and source columns, by each tokenizer mask), and word
level (mean over a word's query pieces, sum over its key pieces, so rows still sum to 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from core.attention_heads.attention import AttentionView, HeadReduction, SpecialTokens, attention_view, reduce_heads, row_normalise
from core.model.analysis import Analysis
from core.model.seq2seq import PairAnalysis

Stack = Literal["encoder", "decoder", "cross"]
STACK_NAMES: dict[str, str] = {
    "encoder": "encoder self-attention",
    "decoder": "decoder self-attention",
    "cross": "cross-attention",
}


@dataclass(frozen=True)
class PairView:
    """Matrices ``[layers, heads, q, k]`` with their query units (rows) and key units (columns).

    For self-attention the two axes are the same units; for cross-attention the rows are target
    units and the columns source units. ``positions`` / ``key_positions``: the token positions each
    unit stands for; ``special`` / ``key_special``: bool, True for special-token units.
    """

    matrices: np.ndarray
    labels: list[str]
    key_labels: list[str]
    positions: list[list[int]]
    key_positions: list[list[int]]
    special: np.ndarray
    key_special: np.ndarray
    causal: bool


def _units(analysis: Analysis, words: bool) -> AttentionView:
    """The analysis's units (tokens or words): labels, positions and special flags, without its matrices."""
    placeholder = np.zeros((analysis.num_tokens, analysis.num_tokens), dtype=np.float32)
    return attention_view(analysis, matrices=placeholder, words=words)


def _merge_rectangular(matrices: np.ndarray, rows: list[list[int]], columns: list[list[int]]) -> np.ndarray:
    """``[..., T, S]`` → ``[..., t, s]``: sum over each column group, mean over each row group (groups are consecutive runs)."""
    summed = np.add.reduceat(matrices, [c[0] for c in columns], axis=-1)
    sizes = np.array([len(r) for r in rows], dtype=matrices.dtype)
    return np.add.reduceat(summed, [r[0] for r in rows], axis=-2) / sizes[:, None]


def cross_attention_view(pair: PairAnalysis, *, special: SpecialTokens = "show", words: bool = False) -> PairView:
    """Cross-attention ``[L_dec, H, t, s]`` with the special-token and word-level options applied."""
    queries, keys = _units(pair.target, words), _units(pair.source, words)
    m = pair.cross_attentions
    if words:
        m = _merge_rectangular(m, queries.positions, keys.positions)
    rows, cols = np.arange(len(queries.labels)), np.arange(len(keys.labels))
    if special != "show":
        if special not in ("hide", "renormalise"):
            raise ValueError(f"unknown special-token mode {special!r}")
        rows, cols = np.flatnonzero(~queries.special), np.flatnonzero(~keys.special)
        m = m[..., rows, :][..., :, cols]
        if special == "renormalise":
            m = row_normalise(m)
    return PairView(
        np.ascontiguousarray(m, dtype=np.float32),
        [queries.labels[i] for i in rows],
        [keys.labels[j] for j in cols],
        [queries.positions[i] for i in rows],
        [keys.positions[j] for j in cols],
        queries.special[rows],
        keys.special[cols],
        causal=False,
    )


def pair_attention_view(pair: PairAnalysis, stack: Stack, *, special: SpecialTokens = "show", words: bool = False) -> PairView:
    """One of the three attentions of ``pair`` as a view: ``"encoder"``, ``"decoder"`` (causal) or ``"cross"``."""
    if stack == "cross":
        return cross_attention_view(pair, special=special, words=words)
    if stack not in ("encoder", "decoder"):
        raise ValueError(f"stack must be 'encoder', 'decoder' or 'cross', got {stack!r}")
    analysis = pair.source if stack == "encoder" else pair.target
    view = attention_view(analysis, special=special, words=words)
    return PairView(view.matrices, view.labels, view.labels, view.positions, view.positions, view.special, view.special,
                    causal=stack == "decoder")


# --- Soft alignment: the source unit each target unit attends to most, per layer ---


@dataclass(frozen=True)
class Alignment:
    """For each decoder layer and each target unit shown: the source unit it attends to most.

    ``queries``: int ``[q]``, indices into ``labels`` (target units); ``targets``: int ``[layers, q]``,
    indices into ``key_labels`` (source units); ``weights``: ``[layers, q]``, the weight there.
    """

    labels: list[str]
    key_labels: list[str]
    queries: np.ndarray
    targets: np.ndarray
    weights: np.ndarray

    def long_table(self) -> pd.DataFrame:
        """One row per (layer, target unit); ``layer`` counts decoder blocks from 0."""
        layers, q = self.targets.shape
        return pd.DataFrame(
            {
                "layer": np.repeat(np.arange(layers), q),
                "target_position": np.tile(self.queries, layers),
                "target": [self.labels[i] for i in self.queries] * layers,
                "source_position": self.targets.ravel(),
                "source": [self.key_labels[j] for j in self.targets.ravel()],
                "weight": self.weights.ravel(),
            }
        )

    def wide_table(self) -> pd.DataFrame:
        """Rows = target units, one column per layer holding ``source unit (weight)``."""
        table = pd.DataFrame({"position": self.queries, "target": [self.labels[i] for i in self.queries]})
        for layer, (targets, weights) in enumerate(zip(self.targets, self.weights)):
            table[f"layer {layer}"] = [f"{self.key_labels[j]} ({w:.2f})" for j, w in zip(targets, weights)]
        return table


def cross_alignment(
    pair: PairAnalysis, *, heads: HeadReduction = "max", skip_special: bool = True, words: bool = False
) -> Alignment:
    """The most-attended source unit of every target unit, per decoder layer (ties: the leftmost).

    Heads reduced first (``"max"``, ``"mean"`` or one head); ``skip_special``: special tokens are
    neither target queries nor source keys (each tokenizer's mask, never by position).
    """
    view = cross_attention_view(pair, words=words)
    reduced = reduce_heads(view.matrices, heads)  # [layers, t, s]
    queries = np.flatnonzero(~view.special) if skip_special else np.arange(len(view.labels))
    scores = np.array(reduced[:, queries, :], dtype=np.float64)
    if skip_special and not view.key_special.all():
        scores[..., view.key_special] = -np.inf
    targets = scores.argmax(axis=-1) if len(queries) else np.zeros((len(reduced), 0), dtype=int)
    weights = np.take_along_axis(reduced[:, queries, :], targets[..., None], axis=-1)[..., 0]
    return Alignment(view.labels, view.key_labels, queries, targets, weights)


# --- Per-head statistics of cross-attention ---

CROSS_STATISTICS: dict[str, str] = {
    "entropy": "Entropy of the attention over the source (nats)",
    "diagonal": "Distance to the alignment diagonal (source tokens)",
    "end": "Share to the source's end tokens (</s> …)",
}
CROSS_DEFINITIONS: dict[str, str] = {
    "entropy": "−Σ p·ln p over the source tokens of a target token's row, in nats: 0 means all attention on one "
    "source token.",
    "diagonal": "Σ over source tokens j of attention × |j − d(i)|, where d(i) = i·(S − 1)/(T − 1) is where target "
    "token i would sit if source and target advanced in step (the diagonal of the alignment): small for a head "
    "that follows the word order, as in translation between similar languages.",
    "end": "Attention to the source's special tokens (</s>, language codes …), found from the tokenizer's mask.",
}


def cross_head_statistics(pair: PairAnalysis) -> pd.DataFrame:
    """One row per decoder ``(layer, head)`` of cross-attention: ``entropy``, ``diagonal``, ``end``, averaged over
    the target's non-special tokens; ``uniform_entropy`` is ln S (attention spread evenly over the source).

    NaN when the target has no non-special token.
    """
    m = pair.cross_attentions.astype(np.float64)  # [L, H, T, S]
    layers, heads, t, s = m.shape
    queries = ~pair.target.special_mask
    sums = m.sum(axis=-1, keepdims=True)
    p = np.divide(m, sums, out=np.zeros_like(m), where=sums > 0)
    entropy = -(p * np.log(np.where(p > 0, p, 1.0))).sum(axis=-1)  # [L, H, T]
    diagonal_at = np.arange(t) * ((s - 1) / (t - 1) if t > 1 else 0.0)
    distance = np.abs(np.arange(s)[None, :] - diagonal_at[:, None])  # [T, S]
    diagonal = (p * distance).sum(axis=-1)
    end = p[..., pair.source.special_mask].sum(axis=-1)

    def mean(values: np.ndarray) -> np.ndarray:
        return values[..., queries].mean(axis=-1) if queries.any() else np.full((layers, heads), np.nan)

    grid_layer, grid_head = np.meshgrid(np.arange(layers), np.arange(heads), indexing="ij")
    table = pd.DataFrame({"layer": grid_layer.ravel(), "head": grid_head.ravel()})
    for name, values in (("entropy", entropy), ("diagonal", diagonal), ("end", end)):
        table[name] = mean(values).ravel()
    table["uniform_entropy"] = float(np.log(s))
    return table
