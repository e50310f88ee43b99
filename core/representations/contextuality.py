"""Does a word get a different vector in every context? Ethayarajh's (2019) measures, per hidden state.

* **Self-similarity** of a word: the mean cosine between its vectors in different contexts (here:
  pairs of occurrences in different documents), for words that occur at least ``MIN_OCCURRENCES``
  times; averaged over those words. 1 means the word has one vector whatever its context (static).
* **Intra-sentence similarity**: the mean cosine between each word of a sentence and the sentence's
  mean word vector; averaged over sentences.
* **Token anisotropy baseline**: the mean cosine between random words from different documents.
  Vectors of one layer share a common direction, so both measures are read against it:
  ``self_similarity − anisotropy`` is how much more alike a word stays than any two words are.

A word is a tokenizer word (see ``core.representations.compare.words``); a word split into pieces is the mean
of its pieces. Hidden state 0 is the embedding layer's output (with position embeddings), so a
word's self-similarity is below 1 there already when its positions differ.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.maths.margins import plateau
from core.model.analysis import Analysis
from core.model.models import LoadedModel
from core.representations.compare import words
from core.representations.drift import DEFAULT_BATCH_SIZE, CorpusEmbeddings, CorpusEmbeddingsAccumulator, run_over_corpus

MIN_OCCURRENCES = 5
MAX_OCCURRENCES_PER_WORD = 30
MAX_WORDS = 150  # the most frequent words only: bounds memory on large corpora
BASELINE_WORDS_PER_DOCUMENT = 24
# Self-similarity is a mean over a corpus sample of words and contexts: hidden states within 0.02 of the lowest are
# named together as where it is lowest, not the one that happens to be lowest.
LOWEST_MARGIN = 0.02
SENTENCE_END = re.compile(r"[.!?]+(?=\s)|\n\s*\n")


@dataclass(frozen=True, eq=False)
class Contextuality:
    """``table``: one row per hidden state ``layer`` (0..L) with ``self_similarity``, ``intra_sentence``,
    ``anisotropy`` (random words from different documents) and the two measures minus the baseline
    (``self_similarity_adjusted``, ``intra_sentence_adjusted``); NaN where there is nothing to measure.
    ``words``: per measured word and layer, ``word``, ``occurrences``, ``documents``, ``layer``, ``self_similarity``.
    ``num_words``: words measured for self-similarity; ``num_sentences``: sentences with two words or more."""

    table: pd.DataFrame
    words: pd.DataFrame
    num_words: int
    num_sentences: int


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


def mean_cross_group_cosine(vectors: np.ndarray, groups: Sequence[int]) -> np.ndarray:
    """``vectors`` ``[n, L + 1, D]`` → ``[L + 1]``: mean cosine over pairs (i, j), i < j, with
    ``groups[i] != groups[j]`` (NaN when there is no such pair).

    Without the ``[n, n]`` matrix of cosines: the dot products of all pairs of unit vectors add up to the squared
    length of their sum, so the cross-group pairs' sum is (|Σ u|² − Σ_g |Σ_{u in g} u|²) / 2 — O(n·D) time and memory
    (the random-word baseline has over a thousand words; the matrix took seconds and hundreds of MB per layer set)."""
    groups = np.asarray(groups)
    unit = _unit(vectors)  # [n, L + 1, D], float64
    _, group_of, sizes = np.unique(groups, return_inverse=True, return_counts=True)
    pairs = (len(groups) ** 2 - int((sizes.astype(np.int64) ** 2).sum())) // 2
    if pairs == 0:
        return np.full(unit.shape[1], np.nan)
    membership = np.zeros((len(sizes), len(groups)))
    membership[group_of.ravel(), np.arange(len(groups))] = 1.0
    per_group = (membership @ unit.reshape(len(groups), -1)).reshape((len(sizes),) + unit.shape[1:])  # [G, L + 1, D]
    everything = (unit.sum(axis=0) ** 2).sum(axis=-1)  # [L + 1]: all ordered pairs, each word with itself too
    within = (per_group ** 2).sum(axis=-1).sum(axis=0)  # [L + 1]: the same within each group
    return (everything - within) / 2 / pairs


def intra_sentence_similarity(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` ``[m, L + 1, D]`` (the words of one sentence, m ≥ 2) → ``[L + 1]``: mean cosine between
    each word and the sentence's mean word vector."""
    unit = _unit(vectors)
    mean = _unit(np.asarray(vectors, dtype=np.float64).mean(axis=0, keepdims=True))
    return (unit * mean).sum(axis=-1).mean(axis=0)


def _candidate_words(documents: Sequence[str], min_occurrences: int) -> set[str]:
    """The ``MAX_WORDS`` most frequent words (lower case, letters and digits) that occur at least
    ``min_occurrences`` times: the only ones whose vectors are kept. The tokenizer's words decide in the end."""
    counts = Counter(w for text in documents for w in re.findall(r"\w+", text.lower()))
    frequent = sorted((w for w, n in counts.items() if n >= min_occurrences), key=lambda w: (-counts[w], w))
    return set(frequent[:MAX_WORDS])


def _sentence_index(text: str) -> Callable[[int], int]:
    ends = [m.end() for m in SENTENCE_END.finditer(text)]
    return lambda position: int(np.searchsorted(ends, position, side="right"))


class ContextualityAccumulator:
    """Collects the word vectors ``contextuality`` measures from the analyses of one pass over ``documents``.

    ``add(index, analysis)`` in the order ``iter_analyses`` yields them (the baseline's random words are drawn
    in that order), then ``result()`` once.
    """

    def __init__(self, model: LoadedModel, documents: Sequence[str], *, min_occurrences: int = MIN_OCCURRENCES,
                 seed: int = 0) -> None:
        self._num_layers = model.num_layers
        self._min_occurrences = min_occurrences
        self._rng = np.random.default_rng(seed)
        self._candidates = _candidate_words(documents, min_occurrences)
        self._kept: dict[str, list[tuple[int, np.ndarray]]] = defaultdict(list)  # word → (document, [L + 1, D])
        self._baseline_vectors: list[np.ndarray] = []  # per document [sampled words, L + 1, D]
        self._baseline_documents: list[int] = []
        self._intra: list[np.ndarray] = []  # per sentence [L + 1]

    def add(self, index: int, analysis: Analysis) -> None:
        found = words(analysis)
        if not found:
            return
        vectors = np.stack([analysis.hidden_states[:, positions].mean(axis=1) for _, positions in found])  # [W, L+1, D]
        for (word, _), vector in zip(found, vectors, strict=True):
            if word in self._candidates and len(self._kept[word]) < MAX_OCCURRENCES_PER_WORD:
                self._kept[word].append((index, vector))
        sample = self._rng.choice(len(found), size=min(len(found), BASELINE_WORDS_PER_DOCUMENT), replace=False)
        self._baseline_vectors.append(vectors[np.sort(sample)])
        self._baseline_documents += [index] * len(sample)
        sentence_of = _sentence_index(analysis.text)
        sentences = np.array([sentence_of(analysis.offsets[positions[0]][0]) for _, positions in found])
        for sentence in np.unique(sentences):
            members = vectors[sentences == sentence]
            if len(members) >= 2:
                self._intra.append(intra_sentence_similarity(members))

    def result(self) -> Contextuality:
        word_rows = []
        per_word = []
        for word in sorted(self._kept):
            occurrences = self._kept[word]
            docs = [d for d, _ in occurrences]
            if len(occurrences) < self._min_occurrences or len(set(docs)) < 2:
                continue
            similarity = mean_cross_group_cosine(np.stack([v for _, v in occurrences]), docs)
            per_word.append(similarity)
            word_rows += [
                {"word": word, "occurrences": len(occurrences), "documents": len(set(docs)), "layer": layer, "self_similarity": s}
                for layer, s in enumerate(similarity)
            ]
        nan = np.full(self._num_layers + 1, np.nan)
        self_similarity = np.mean(per_word, axis=0) if per_word else nan
        intra_sentence = np.mean(self._intra, axis=0) if self._intra else nan
        anisotropy = (
            mean_cross_group_cosine(np.concatenate(self._baseline_vectors), self._baseline_documents)
            if self._baseline_vectors else nan
        )
        table = pd.DataFrame(
            {
                "layer": np.arange(self._num_layers + 1),
                "self_similarity": self_similarity,
                "intra_sentence": intra_sentence,
                "anisotropy": anisotropy,
                "self_similarity_adjusted": self_similarity - anisotropy,
                "intra_sentence_adjusted": intra_sentence - anisotropy,
            }
        )
        columns = ["word", "occurrences", "documents", "layer", "self_similarity"]
        return Contextuality(table, pd.DataFrame(word_rows, columns=columns), len(per_word), len(self._intra))


def contextuality(
    model: LoadedModel,
    documents: Sequence[str],
    *,
    min_occurrences: int = MIN_OCCURRENCES,
    max_tokens: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> Contextuality:
    """Self-similarity, intra-sentence similarity and the token anisotropy baseline of ``documents``.

    A word counts for self-similarity when it occurs at least ``min_occurrences`` times in at
    least two documents (its first ``MAX_OCCURRENCES_PER_WORD`` occurrences are used; only the
    ``MAX_WORDS`` most frequent such words are measured). The baseline
    uses up to ``BASELINE_WORDS_PER_DOCUMENT`` random words of each document (``seed``).
    ``embed_corpus_and_contextuality`` gives this and ``core.representations.drift.embed_corpus`` from one pass.
    """
    accumulator = ContextualityAccumulator(model, documents, min_occurrences=min_occurrences, seed=seed)
    run_over_corpus(model, documents, [accumulator], max_tokens=max_tokens, batch_size=batch_size, progress=progress)
    return accumulator.result()


def embed_corpus_and_contextuality(
    model: LoadedModel,
    documents: Sequence[str],
    *,
    max_tokens: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[CorpusEmbeddings, Contextuality]:
    """``core.representations.drift.embed_corpus`` and ``contextuality`` (default options) of ``documents`` from one pass of ``model``
    over them (the Drift page shows both); each equals the function called alone."""
    embeddings = CorpusEmbeddingsAccumulator(model, len(documents))
    context = ContextualityAccumulator(model, documents)
    run_over_corpus(model, documents, [embeddings, context], max_tokens=max_tokens, batch_size=batch_size,
                    progress=progress)
    return embeddings.result(), context.result()


def contextuality_sentence(table: pd.DataFrame) -> str:
    """What ``Contextuality.table`` shows, in words written from its numbers."""
    rows = table.dropna(subset=["self_similarity", "anisotropy"]).sort_values("layer")
    if rows.empty:
        return "No word occurs often enough in two documents or more to measure self-similarity."
    first, last = rows.iloc[0], rows.iloc[-1]
    adjusted = rows["self_similarity_adjusted"].to_numpy()
    low, high = plateau(-adjusted, LOWEST_MARGIN)  # the lowest layers, not the noisy argmin among near-equal ones
    best = int(np.nanargmin(adjusted))
    where = (f"at hidden state {int(rows.iloc[best].layer)} ({adjusted[best]:.3f})" if low == high else
             f"at hidden states {int(rows.iloc[low].layer)}–{int(rows.iloc[high].layer)} (within {LOWEST_MARGIN:g} of "
             f"its minimum, {adjusted[best]:.3f})")
    text = (
        f"Self-similarity is {first.self_similarity:.3f} at hidden state {int(first.layer)} and "
        f"{last.self_similarity:.3f} at hidden state {int(last.layer)}, the last, where random words from different "
        f"documents have {last.anisotropy:.3f}. Above that baseline it is lowest {where}."
    )
    if int(first.layer) == 0:
        text += " At hidden state 0 the same word differs only by its position embedding, so it is close to 1 there."
    change = last.self_similarity_adjusted - first.self_similarity_adjusted
    if change < -0.1:
        text += (
            f" Above the baseline, the same word's vectors in different contexts are {abs(change):.2f} less alike at the "
            "last hidden state than at the first: the model gives a word a different vector in every context."
        )
    elif change > 0.1:
        text += " Above the baseline, the same word's vectors grow more alike towards the top."
    else:
        text += " Above the baseline, self-similarity changes little from the first hidden state to the last."
    if pd.notna(last.intra_sentence):
        text += (
            f" Intra-sentence similarity goes from {first.intra_sentence:.3f} to {last.intra_sentence:.3f}: how much the "
            "words of one sentence resemble their sentence's mean."
        )
    return text
