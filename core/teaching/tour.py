"""The numbers the guided tour writes its sentences from; each is computed for the model on screen."""

from __future__ import annotations

import numpy as np
import pandas as pd

from core.attention_heads.head_statistics import TokenRoles, rank_heads
from core.maths.similarity import cosine
from core.model.analysis import Analysis
from core.model.models import LoadedModel
from core.representations import compare
from core.representations.senses import builtin_words, find_word

SINK_SHARE = 0.5  # a head "parks" its attention when more than half of it goes to [CLS]/[SEP]-like tokens
# One pair of sentences and one control: a cosine lead below 0.02 is too small to tell the sense from the wording of the
# sentences, so the same-vector step counts neither it nor a growth of it smaller than that.
CONTROL_MARGIN = 0.02
# The corpus step's medians move with the corpus chosen: a layer counts as moving the text further only when the
# median cosine falls by more than 0.01 there.
DRIFT_STEP_MARGIN = 0.01


def clearest_head(table: pd.DataFrame, statistic: str = "previous") -> tuple[int, int, float] | None:
    """``(layer, head, value)`` of the head with the highest ``statistic`` in a ``core.attention_heads.head_statistics`` table;
    None when the statistic is NaN for every head (no query token to average over)."""
    best = rank_heads(table, statistic, top=1)
    if best.empty or not np.isfinite(best[statistic].iloc[0]):
        return None
    return int(best["layer"].iloc[0]), int(best["head"].iloc[0]), float(best[statistic].iloc[0])


def uniform_previous_share(roles: TokenRoles) -> float:
    """The previous-token share a head would get by spreading attention evenly (the chance level):
    the mean over the query tokens that have a previous token of 1 / (keys the query sees)."""
    t = len(roles.query)
    positions = np.arange(t)
    queries = roles.query & (positions >= 1)
    if not queries.any():
        return float("nan")
    visible = positions + 1 if roles.causal else np.full(t, t)
    return float(np.mean(1.0 / visible[queries]))


def previous_is_sink(roles: TokenRoles) -> bool:
    """True when the token before every query token (that has one) is a start or end token ("Hi": [CLS] hi
    [SEP]): then attention to the previous token cannot be told from attention to the sink."""
    before = np.flatnonzero(roles.query[1:])  # query q = i + 1 has token i before it
    return bool(before.size) and bool((roles.start[before] | roles.end[before]).all())


def sink_heads(table: pd.DataFrame, threshold: float = SINK_SHARE) -> int:
    """How many heads give more than ``threshold`` of their attention to start and end tokens together."""
    return int(((table["first"] + table["end"]) > threshold).sum())


def first_builtin_word(text: str) -> str | None:
    """The first word of ``text`` (in text order) that has a built-in sense set, or None."""
    found = [(spans[0][0], word) for word in builtin_words() if (spans := find_word(text, word))]
    return min(found)[1] if found else None


def layers_where(values: np.ndarray, than: np.ndarray) -> list[int]:
    """Indices where ``values`` is strictly greater than ``than``."""
    return [int(i) for i in np.flatnonzero(np.asarray(values) > np.asarray(than))]


def clearest_sink_head(table: pd.DataFrame) -> tuple[int, int, float] | None:
    """``(layer, head, share)`` of the head that gives the largest share of its attention to start and end tokens
    together (columns ``first`` + ``end`` of a ``core.attention_heads.head_statistics`` table); None when no head has a share."""
    return clearest_head(table.assign(sink=table["first"] + table["end"]), "sink")


def control_lead(gap: np.ndarray) -> str:
    """The same-vector step's sentences on ``gap`` ``[hidden states]``: cosine(A, C) − cosine(A, B), > 0 where the
    control pair is the more similar; a lead or its growth within ``CONTROL_MARGIN`` is not counted."""
    gap = np.asarray(gap, dtype=float)
    closer = layers_where(gap, np.full_like(gap, CONTROL_MARGIN))
    said = (f"The control pair is more similar by more than {CONTROL_MARGIN:g} in cosine at hidden states "
            f"{', '.join(map(str, closer))}. " if closer else
            f"On these sentences the control pair is never more similar by more than {CONTROL_MARGIN:g} in cosine. ")
    if gap[-1] > max(gap[0], 0) + CONTROL_MARGIN:
        return said + (f"The control's lead grows from {gap[0]:+.3f} at hidden state 0 (position only) to {gap[-1]:+.3f} "
                       "at the last: context, not position, has pulled the senses apart.")
    return said + (f"The control's lead is {gap[0]:+.3f} at hidden state 0 (position only) and {gap[-1]:+.3f} at the "
                   f"last, no clear growth (within {CONTROL_MARGIN:g}), so on these sentences this model does not pull "
                   "the two senses apart.")


def falls_at_every_layer(medians: np.ndarray) -> bool:
    """True when ``medians`` ``[hidden states]`` (median cosine to the static embedding) falls by more than
    ``DRIFT_STEP_MARGIN`` from each hidden state to the next."""
    return bool((np.diff(np.asarray(medians, dtype=float)) < -DRIFT_STEP_MARGIN).all())


def added_special_tokens(analysis: Analysis) -> list[str]:
    """The special tokens the tokenizer added to the text, each once, in order."""
    return list(dict.fromkeys(analysis.tokens[i] for i in np.flatnonzero(analysis.special_mask)))


def split_words(analysis: Analysis) -> list[str]:
    """The words of the text that became more than one token."""
    return [word for word, positions in compare.words(analysis) if len(positions) > 1]


def word_lookups(model: LoadedModel, analyses: list[Analysis], word: str) -> tuple[np.ndarray, list[list[int]], float]:
    """``word``'s rows of the word-embedding table in each text (``[texts, hidden]``, its first token's), the token
    ids it became in each, and the cosine of the first two rows."""
    rows = np.stack([compare.word_lookup(model, analysis, word) for analysis in analyses])
    ids = [[analysis.input_ids[p] for p in compare.word_positions(analysis, word)] for analysis in analyses]
    return rows, ids, float(cosine(rows[0], rows[1]))


def tour_query(analysis: Analysis) -> int:
    """The query token the inside step explains: a word with a built-in sense set where the text has one, else the
    second ordinary token (the first when there is one), else token 0."""
    word = first_builtin_word(analysis.text)
    if word and compare.word_occurrences(analysis, word):
        return compare.word_positions(analysis, word)[0]
    ordinary = [i for i in range(analysis.num_tokens) if not analysis.special_mask[i]]
    return ordinary[min(1, len(ordinary) - 1)] if ordinary else 0


def knockout_shares(table: pd.DataFrame, heads: list[tuple[int, int]]) -> tuple[list[float], list[float], float]:
    """For ``heads`` ``(layer, head)`` of a ``core.attention_heads.head_statistics`` table: the share of attention
    each gives start and end tokens together, the share each gives the previous token, and the first share's mean
    over every head (NaN shares left out)."""
    row = table.set_index(["layer", "head"])
    return ([float(row.loc[h, "first"] + row.loc[h, "end"]) for h in heads], [float(row.loc[h, "previous"]) for h in heads],
            float(np.nanmean(table["first"] + table["end"])))
