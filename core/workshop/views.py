"""What a room shows: a learner's sentence placed on the map of the bundled sentences (its nearest bundled
neighbours), the learners' votes over the layer × head grid, and the measured previous-token scores beside them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.attention_heads.head_statistics import analysis_statistics, mean_statistics, statistic_grid
from core.maths.projection import FittedProjection
from core.model.inference import iter_analyses
from core.model.models import LoadedModel
from core.representations.placement import DEFAULT_K, nearest_occurrences, sense_votes
from core.representations.senses import Occurrences, builtin_sense_sets, builtin_set
from core.workshop.rooms import VOTE


@dataclass(frozen=True, eq=False)
class EntryPlacement:
    """Where the first occurrence of the word in one entry lands at one hidden state.

    ``xy``: ``[2]`` on the bundled sentences' fitted map; ``span``: the occurrence's characters in the entry;
    ``neighbours``: the ``k`` most similar bundled occurrences (columns ``rank``, ``sentence``, ``label``, ``cosine``,
    in the model's full space); ``sense``: the sense most of them have ("" on a tie); ``tally``: e.g. "river 2, money 1".
    """

    xy: np.ndarray
    span: tuple[int, int]
    neighbours: pd.DataFrame
    sense: str
    tally: str


def room_sentences(word: str) -> tuple[list[str], list[str]]:
    """The bundled sentences a room's map is drawn from, and their senses: the built-in set of ``word``."""
    return builtin_set(word)


def room_words() -> list[str]:
    """The words a senses room can be opened with (those with a built-in set, so the map has labelled senses)."""
    return sorted(builtin_sense_sets()["word"].unique())


def vote_sentences() -> tuple[str, ...]:
    """The sentences a vote room measures previous-token scores on: every built-in senses sentence, once."""
    return tuple(dict.fromkeys(builtin_sense_sets()["sentence"]))


def place_entry(own: Occurrences, bundled: Occurrences, labels: Sequence[str], fitted: FittedProjection, layer: int,
                k: int = DEFAULT_K) -> EntryPlacement | None:
    """``own``'s first occurrence placed into ``fitted`` (the map of ``bundled.vectors[layer]``) with its nearest
    labelled occurrences (``labels``: one per sentence of ``bundled``); None when ``own`` has no occurrence."""
    if own.count == 0:
        return None
    query = own.vectors[:, 0]
    point_labels = [labels[i] for i in bundled.sentence_ids]
    found = nearest_occurrences(bundled.vectors, point_labels, query, k)
    here = found[found["layer"] == layer].copy()
    here.insert(2, "sentence", [bundled.sentences[bundled.sentence_ids[i]] for i in here["occurrence"]])
    vote = sense_votes(here).iloc[0]
    counts = here["label"].value_counts()
    tied = len(counts) > 1 and counts.iloc[0] == counts.iloc[1]
    return EntryPlacement(fitted.transform(query[layer][None])[0], own.spans[0],
                          here.loc[:, ["rank", "sentence", "label", "cosine"]].reset_index(drop=True),
                          "" if tied else str(vote["sense"]), str(vote["tally"]))


@dataclass(frozen=True, eq=False)
class PreviousTokenScores:
    """Per head, the mean attention of a query to the token just before it over the bundled sentences
    (``core.attention_heads.head_statistics``'s "previous", each sentence counting once): ``scores`` ``[layers,
    heads]``; ``chance``: the same mean for attention spread evenly over the keys each query sees (1/T for an encoder,
    1/(i + 1) for decoder query i); ``texts``: how many sentences."""

    scores: np.ndarray
    chance: float
    texts: int

    def best(self) -> tuple[int, int]:
        layer, head = np.unravel_index(int(np.nanargmax(self.scores)), self.scores.shape)
        return int(layer), int(head)


def previous_token_scores(model: LoadedModel, texts: Sequence[str]) -> PreviousTokenScores:
    """``PreviousTokenScores`` of ``model`` on ``texts``, from its own attention."""
    tables, chances = [], []
    for _, analysis in iter_analyses(model, list(texts)):
        table, roles = analysis_statistics(analysis, model.tokenizer)
        tables.append(table)
        positions = np.arange(len(roles.query))
        counted = roles.query & (positions >= 1)
        visible = positions + 1 if roles.causal else np.full(len(positions), len(positions))
        if counted.any():
            chances.append(float(np.mean(1.0 / visible[counted])))
    return PreviousTokenScores(statistic_grid(mean_statistics(tables), "previous"), float(np.mean(chances)), len(texts))


def vote_counts(votes: Iterable[tuple[str, str]], num_layers: int, num_heads: int) -> np.ndarray:
    """Int ``[layers, heads]``: how many learners' last vote names each head; ``votes`` are ``(learner, text)`` in the
    order sent (a learner who votes again changes their vote); a vote for a head the model lacks is not counted."""
    last: dict[str, tuple[int, int]] = {}
    for learner, text in votes:
        match = VOTE.match(text)
        if match and int(match[1]) < num_layers and int(match[2]) < num_heads:
            last[learner] = (int(match[1]), int(match[2]))
    counts = np.zeros((num_layers, num_heads), dtype=np.int64)
    for layer, head in last.values():
        counts[layer, head] += 1
    return counts
