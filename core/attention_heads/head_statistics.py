"""Per-head attention statistics (Clark et al. 2019; Vig & Belinkov 2019), for one text or a corpus.

Every statistic is computed per query row and averaged over the **query tokens**: every
non-special token (by ``Analysis.special_mask``); for a decoder the first position is left
out too, because it can only attend to itself. Shares of a row are fractions of the row's
sum (rows are renormalised first, so matrices whose rows do not sum to 1, such as
norm-weighted attention, are compared on the same footing). Positions are token positions,
special tokens included: query ``i`` → key ``i − 1`` is "previous", ``i`` → ``i + 1`` is "next".

Result tables have one row per ``(layer, head)`` with ``layer`` a 0-based index into
``Analysis.attentions`` (the block that produces ``hidden_states[layer + 1]``) and ``head``
a 0-based head index.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.model.analysis import Analysis
from core.model.inference import iter_analyses
from core.model.models import LoadedModel

# column -> what it measures, as the page names it
STATISTICS: dict[str, str] = {
    "entropy": "Entropy of the attention distribution (nats)",
    "first": "Share to [CLS] / the first token",
    "end": "Share to [SEP] / end tokens",
    "punctuation": "Share to punctuation",
    "self": "Share to the token itself",
    "previous": "Share to the previous token (i → i−1)",
    "next": "Share to the next token (i → i+1)",
    "distance": "Mean attention distance (tokens)",
}
# How each statistic is computed, in one sentence each (the page shows them).
DEFINITIONS: dict[str, str] = {
    "entropy": "−Σ p·ln p over the keys of a query's row, in nats: 0 means all attention on one token.",
    "first": "Attention to [CLS] or <s>, found from the tokenizer's special tokens, not by position; for a model "
    "that adds none (GPT-2) it is the first token, a well-known attention sink.",
    "end": "Attention to [SEP], </s> or <|endoftext|>, found from the tokenizer's special tokens (GPT-2 adds none, "
    "so there it is 0 unless the text contains <|endoftext|>).",
    "punctuation": "Attention to tokens whose text is only punctuation (Unicode category P*).",
    "self": "Attention of query i to key i.",
    "previous": "Attention of query i to key i − 1, the token just before it (special tokens count as tokens).",
    "next": "Attention of query i to key i + 1, the token just after it; always 0 for a decoder, which cannot see it.",
    "distance": "Σ over keys j of attention × |i − j|: how many tokens away the attention goes, on average.",
}
# Same for every head of one text: the entropy of a uniform row over the keys a query can see.
UNIFORM_ENTROPY = "uniform_entropy"


@dataclass(frozen=True)
class TokenRoles:
    """Which of the ``T`` tokens play which part (bool ``[T]`` each).

    ``query``: the queries averaged over. ``start``: [CLS]-like special tokens, or the first
    token when the text has none (``start_is_first_token``: GPT-2's "first token" sink).
    ``end``: [SEP]-like special tokens ([SEP], </s>, <|endoftext|>). ``punctuation``: non-special
    tokens whose text is only punctuation (Unicode category P*). ``causal``: decoder attention.
    """

    query: np.ndarray
    start: np.ndarray
    end: np.ndarray
    punctuation: np.ndarray
    causal: bool
    start_is_first_token: bool = False


def is_punctuation(text: str) -> bool:
    """True for non-empty text made only of punctuation characters (Unicode category P*), spaces aside."""
    stripped = "".join(text.split())
    return bool(stripped) and all(unicodedata.category(c).startswith("P") for c in stripped)


def sink_token_ids(tokenizer) -> tuple[set[int], set[int]]:
    """``(start ids, end ids)`` from the tokenizer: [CLS]/<s> start; [SEP]/</s>/<|endoftext|> end.

    A bos token that is also the eos token (GPT-2's <|endoftext|>) counts as an end token.
    """
    end = {tokenizer.sep_token_id, tokenizer.eos_token_id} - {None}
    start = {tokenizer.cls_token_id, tokenizer.bos_token_id} - {None} - end
    return start, end


@dataclass(frozen=True)
class SinkNames:
    """What the first-token and end-token statistics are called for one tokenizer, from the special tokens it adds
    to a text: ``first`` "[CLS] / the first token" (BERT), "<s> / the first token" (BART) or "the first token"
    (T5, GPT-2); ``end`` "[SEP] / end tokens", "</s> / end tokens" or "end-of-text tokens" (a tokenizer adding
    none); ``end_tokens`` the end tokens alone ("[SEP]"); ``added`` every added special token in order ("[CLS]",
    "[SEP]")."""

    first: str
    end: str
    end_tokens: tuple[str, ...]
    added: tuple[str, ...]


def sink_names(tokenizer) -> SinkNames:
    """The names of ``sink_token_ids``' start and end tokens that ``tokenizer`` adds to a text."""
    start_ids, end_ids = sink_token_ids(tokenizer)
    plain = set(tokenizer("a", add_special_tokens=False)["input_ids"])
    added = [i for i in dict.fromkeys(tokenizer("a", add_special_tokens=True)["input_ids"]) if i not in plain]
    starts = tokenizer.convert_ids_to_tokens([i for i in added if i in start_ids])
    ends = tokenizer.convert_ids_to_tokens([i for i in added if i in end_ids])
    first = f"{' / '.join(starts)} / the first token" if starts else "the first token"
    end = f"{' / '.join(ends)} / end tokens" if ends else "end-of-text tokens"
    return SinkNames(first, end, tuple(ends), tuple(tokenizer.convert_ids_to_tokens(added)))


def token_roles(analysis: Analysis, *, start_ids: set[int], end_ids: set[int]) -> TokenRoles:
    """The roles of the analysis's tokens, found from the special mask and token ids, never by position alone."""
    t = analysis.num_tokens
    special = analysis.special_mask
    ids = np.array(analysis.input_ids)
    start = special & np.isin(ids, list(start_ids))
    first_token_sink = not start.any()
    if first_token_sink:
        start = np.zeros(t, dtype=bool)
        start[0] = True
    end = special & np.isin(ids, list(end_ids))
    punctuation = np.array(
        [not special[i] and is_punctuation(analysis.text[s:e]) for i, (s, e) in enumerate(analysis.offsets)], dtype=bool
    )
    query = ~special
    if analysis.is_decoder:
        query[0] = False
    return TokenRoles(query, start, end, punctuation, analysis.is_decoder, first_token_sink)


def _mean_over(values: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Mean of ``values`` ``[..., T]`` over the positions where ``queries`` is True; NaN when there are none."""
    if not queries.any():
        return np.full(values.shape[:-1], np.nan)
    return values[..., queries].mean(axis=-1)


def head_statistics(matrices: np.ndarray, roles: TokenRoles) -> pd.DataFrame:
    """Statistics of ``matrices`` ``[layers, heads, T, T]`` (rows = queries), one table row per head.

    Columns: ``layer``, ``head``, every key of ``STATISTICS``, and ``uniform_entropy``
    (mean over the query tokens of ln n, n = keys the query can see: ``T`` for an encoder,
    ``i + 1`` for decoder query ``i``). A statistic with no query token to average over is NaN.
    """
    if matrices.ndim != 4 or matrices.shape[2] != matrices.shape[3]:
        raise ValueError(f"matrices must be [layers, heads, T, T], got {matrices.shape}")
    layers, heads, t, _ = matrices.shape
    if roles.query.shape != (t,):
        raise ValueError(f"token roles are for {roles.query.shape[0]} tokens, matrices for {t}")
    positions = np.arange(t)
    distance = np.abs(positions[:, None] - positions[None, :]).astype(np.float64)
    q = roles.query
    per_query = {name: np.empty((layers, heads, t)) for name in STATISTICS}
    for layer in range(layers):  # one layer at a time keeps the float64 copies small at 512 tokens
        m = matrices[layer].astype(np.float64)
        sums = m.sum(axis=-1, keepdims=True)
        p = np.divide(m, sums, out=np.zeros_like(m), where=sums > 0)  # [heads, T, T]
        per_query["entropy"][layer] = -np.einsum("hij,hij->hi", p, np.log(np.where(p > 0, p, 1.0)))
        per_query["first"][layer] = p[..., roles.start].sum(axis=-1)
        per_query["end"][layer] = p[..., roles.end].sum(axis=-1)
        per_query["punctuation"][layer] = p[..., roles.punctuation].sum(axis=-1)
        per_query["self"][layer] = p[:, positions, positions]
        per_query["previous"][layer] = np.pad(p[:, positions[1:], positions[:-1]], ((0, 0), (1, 0)))
        per_query["next"][layer] = np.pad(p[:, positions[:-1], positions[1:]], ((0, 0), (0, 1)))
        per_query["distance"][layer] = np.einsum("hij,ij->hi", p, distance)
    has_previous = q & (positions >= 1)
    has_next = q & (positions <= t - 2)
    values = {
        name: _mean_over(v, has_previous if name == "previous" else has_next if name == "next" else q)
        for name, v in per_query.items()
    }
    visible = positions + 1 if roles.causal else np.full(t, t)
    uniform = float(np.log(visible[q]).mean()) if q.any() else np.nan
    grid_layer, grid_head = np.meshgrid(np.arange(layers), np.arange(heads), indexing="ij")
    table = pd.DataFrame({"layer": grid_layer.ravel(), "head": grid_head.ravel()})
    for name in STATISTICS:
        table[name] = values[name].ravel()
    table[UNIFORM_ENTROPY] = uniform
    return table


def analysis_statistics(analysis: Analysis, tokenizer, matrices: np.ndarray | None = None) -> tuple[pd.DataFrame, TokenRoles]:
    """``head_statistics`` of the analysis's attentions (or of ``matrices`` of the same shape), and the roles used."""
    start_ids, end_ids = sink_token_ids(tokenizer)
    roles = token_roles(analysis, start_ids=start_ids, end_ids=end_ids)
    return head_statistics(analysis.attentions if matrices is None else matrices, roles), roles


def mean_statistics(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The per-head mean of several texts' tables, each text counting once (NaN entries skipped)."""
    if not tables:
        raise ValueError("no tables to average")
    return pd.concat(tables).groupby(["layer", "head"], as_index=False, sort=True).mean()


def corpus_statistics(
    model: LoadedModel,
    texts: Sequence[str],
    *,
    max_tokens: int | None = None,
    batch_size: int = 16,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """``head_statistics`` averaged over ``texts`` (each text counting once), in batches.

    Each text's attentions are reduced to its small table as soon as its batch is done,
    so a corpus's attentions are never all in memory. ``progress(done, total)`` after each batch.
    """
    tables = [
        analysis_statistics(analysis, model.tokenizer)[0]
        for _, analysis in iter_analyses(model, texts, max_tokens=max_tokens, batch_size=batch_size, progress=progress)
    ]
    return mean_statistics(tables)


def statistic_grid(table: pd.DataFrame, statistic: str) -> np.ndarray:
    """One statistic as a ``[layers, heads]`` array."""
    grid = table.pivot(index="layer", columns="head", values=statistic).sort_index().sort_index(axis=1)
    return grid.to_numpy(dtype=np.float64)


def rank_heads(table: pd.DataFrame, statistic: str, *, top: int = 5) -> pd.DataFrame:
    """The ``top`` heads with the highest ``statistic`` (NaN last): columns ``layer``, ``head``, ``statistic``."""
    ranked = table.sort_values([statistic, "layer", "head"], ascending=[False, True, True], na_position="last")
    return ranked.loc[:, ["layer", "head", statistic]].head(top).reset_index(drop=True)
