"""One word across many sentences: its contextual embedding at every layer, and how well its senses separate.

``occurrence_embeddings`` finds every whole-word occurrence of a word (case-insensitive) through
the tokenizer's character offsets, mean-pools the tokens that cover it (a word split into
several pieces gives one vector) and keeps that vector for every layer at once. ``separation``
measures, per layer, how well sense labels are told apart in the original embedding space.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from core.errors import AnalysisError
from core.model.inference import iter_analyses
from core.model.models import LoadedModel
from core.representations.corpus import CorpusError, read_csv_text, require_text_column

SENSE_SETS_CSV = Path(__file__).parent.parent / "data" / "senses.csv"
MAX_SENTENCES = 2_000
# "label: sentence": a label is one to three short words (letters, digits, - or _), at most 40 characters,
# then a colon and white space, so that "At 10:30 we ..." and "https://..." are sentences, not labels.
LABEL_PREFIX = re.compile(r"^\s*([\w-]+(?:[ \t]+[\w-]+){0,2})[ \t]*:\s+(\S.*)$")
MAX_LABEL_CHARS = 40
NOT_A_LABEL = re.compile(r"[\d\s_-]+|(?:https?|ftps?|mailto|file|www)", re.IGNORECASE)  # digits only, URL schemes
# Cosine similarities closer than this count as a tie (identical vectors give equal similarities up to rounding).
TIE_TOLERANCE = 1e-9
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n")


@dataclass(frozen=True, eq=False)
class Occurrences:
    """Every occurrence of ``word`` in ``sentences`` (N of them), at every layer.

    ``vectors``: float32 ``[layers + 1, N, hidden]``; index 0 is the embedding layer's output,
    index k the output of block k. ``sentence_ids``: int ``[N]``, the sentence each occurrence
    is in. ``spans``: each occurrence's ``(start, end)`` characters in its sentence.
    ``missing``: indices of sentences where the word was not found (or only past the token limit).
    """

    word: str
    sentences: list[str]
    vectors: np.ndarray
    sentence_ids: np.ndarray
    spans: list[tuple[int, int]]
    missing: list[int]

    def __post_init__(self) -> None:
        n = self.vectors.shape[1]
        if self.vectors.ndim != 3 or len(self.sentence_ids) != n or len(self.spans) != n:
            raise ValueError("vectors, sentence_ids and spans must describe the same occurrences")
        self.vectors.setflags(write=False)
        self.sentence_ids.setflags(write=False)

    @property
    def count(self) -> int:
        return self.vectors.shape[1]

    @property
    def num_layers(self) -> int:
        return self.vectors.shape[0] - 1


@functools.cache
def _word_char() -> str:
    """A word character: what ``\\w`` matches, plus combining marks (the accent of a decomposed "é").

    Built once, on first use (it scans every code point for categories Mn, Mc and Me).
    """
    ranges: list[list[int]] = []
    for code in range(sys.maxunicode + 1):
        if unicodedata.category(chr(code)).startswith("M"):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    marks = "".join(re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in ranges)
    return r"[\w" + marks + "]"


def nfc(text: str) -> str:
    """``text`` in Unicode normal form C: "e" + combining acute becomes one "é", as most text is typed."""
    return unicodedata.normalize("NFC", text)


def word_pattern(word: str) -> re.Pattern:
    """Whole-word, case-insensitive pattern: "bank" matches "Bank", "bank,", "(bank)" and the
    "bank" of "bank's", never "banks", "riverbank" or "bank_account". The word is taken in NFC,
    and a combining mark counts as part of a word ("cafe" never matches inside "café"); match it
    against NFC text (``nfc``), as ``find_word`` and ``occurrence_embeddings`` do."""
    word = nfc(word.strip())
    if not word:
        raise AnalysisError("Type the word to look for.")
    return re.compile(f"(?<!{_word_char()})" + re.escape(word) + f"(?!{_word_char()})", re.IGNORECASE)


def find_word(text: str, word: str) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of every whole-word occurrence of ``word`` in ``nfc(text)``
    (the same as in ``text`` when it is already NFC, as the sentence readers return it)."""
    return [m.span() for m in word_pattern(word).finditer(nfc(text))]


def covering_tokens(offsets: Sequence[tuple[int, int]], special_mask: np.ndarray, span: tuple[int, int]) -> list[int]:
    """Positions of the non-special tokens whose character span overlaps ``span``."""
    start, end = span
    return [
        i
        for i, (s, e) in enumerate(offsets)
        if not special_mask[i] and e > s and s < end and e > start
    ]


def occurrence_embeddings(
    model: LoadedModel,
    sentences: list[str],
    word: str,
    *,
    batch_size: int = 16,
    progress: Callable[[int, int], None] | None = None,
) -> Occurrences:
    """Embeddings of every occurrence of ``word`` in ``sentences``, all layers in one pass.

    Each occurrence's vector is the mean of the hidden states of the tokens covering it
    (for every layer at once). Sentences without the word are not run through the model.
    Sentences are taken in NFC (``nfc``); ``Occurrences.sentences`` and the spans refer to that form.
    """
    sentences = [nfc(s) for s in sentences]
    pattern = word_pattern(word)
    spans_by_sentence = {i: [m.span() for m in pattern.finditer(s)] for i, s in enumerate(sentences)}
    with_word = [i for i, spans in spans_by_sentence.items() if spans]
    found: dict[int, list[tuple[tuple[int, int], np.ndarray]]] = {}
    texts = [sentences[i] for i in with_word]
    analyses = iter_analyses(model, texts, batch_size=batch_size, attentions=False, progress=progress) if texts else ()
    for k, analysis in analyses:
        for span in spans_by_sentence[with_word[k]]:
            tokens = covering_tokens(analysis.offsets, analysis.special_mask, span)
            if tokens:  # an occurrence past the token limit has no tokens
                found.setdefault(with_word[k], []).append((span, analysis.hidden_states[:, tokens].mean(axis=1)))
    ids = sorted(found)
    points = [(i, span, vector) for i in ids for span, vector in found[i]]
    hidden = model.hidden_size
    vectors = (
        np.stack([v for _, _, v in points], axis=1).astype(np.float32)
        if points
        else np.zeros((model.num_layers + 1, 0, hidden), dtype=np.float32)
    )
    return Occurrences(
        word=word.strip(),
        sentences=list(sentences),
        vectors=vectors,
        sentence_ids=np.array([i for i, _, _ in points], dtype=np.int64),
        spans=[span for _, span, _ in points],
        missing=[i for i in range(len(sentences)) if i not in found],
    )


def measured_labels(labels: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(measured, left out)``: labels with at least two occurrences, and the others (empty labels excluded)."""
    counts = Counter(label for label in labels if label)
    measured = sorted(label for label, n in counts.items() if n >= 2)
    return measured, sorted(label for label, n in counts.items() if n < 2)


def _measured_points(vectors: np.ndarray, labels: Sequence[str]) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
    """``(vectors, measured labels, keep mask [N], labels of the kept points)``; ValueError unless
    ``vectors`` is ``[layers + 1, len(labels), hidden]``."""
    vectors = np.asarray(vectors)
    if vectors.ndim != 3 or vectors.shape[1] != len(labels):
        raise ValueError(f"vectors must be [layers + 1, {len(labels)}, hidden], got {vectors.shape}")
    measured, _ = measured_labels(labels)
    keep = np.array([label in measured for label in labels], dtype=bool)
    return vectors, measured, keep, np.array(labels, dtype=object)[keep]


def separation(vectors: np.ndarray, labels: list[str]) -> pd.DataFrame:
    """How well the labels separate at each layer of ``vectors`` ``[layers + 1, N, hidden]``.

    Columns ``layer``, ``knn_accuracy`` (leave-one-out 1-nearest-neighbour accuracy, cosine
    similarity: the share of occurrences whose most similar other occurrence has the same label;
    when several others are equally similar, the occurrence scores the share of them with its
    label, so the result never depends on the order of the sentences) and ``silhouette``
    (cosine, -1 to 1). Only labels with at least two occurrences count (see
    ``measured_labels``); with fewer than two such labels both measures are NaN.
    """
    from sklearn.metrics import silhouette_score  # noqa: PLC0415 - scikit-learn's import cost, only when asked
    from sklearn.metrics.pairwise import cosine_similarity  # noqa: PLC0415 - scikit-learn's import cost, only when asked

    vectors, measured, keep, kept_labels = _measured_points(vectors, labels)
    rows = []
    for layer in range(vectors.shape[0]):
        knn = silhouette = float("nan")
        if len(measured) >= 2:
            x = vectors[layer][keep].astype(np.float64)
            similarity = cosine_similarity(x)
            np.fill_diagonal(similarity, -np.inf)
            nearest = similarity >= similarity.max(axis=1, keepdims=True) - TIE_TOLERANCE  # [n, n], ties included
            same = kept_labels[:, None] == kept_labels[None, :]
            knn = float(np.mean((nearest & same).sum(axis=1) / nearest.sum(axis=1)))
            silhouette = float(silhouette_score(x, kept_labels, metric="cosine"))
        rows.append({"layer": layer, "knn_accuracy": knn, "silhouette": silhouette})
    return pd.DataFrame(rows, columns=["layer", "knn_accuracy", "silhouette"])


def builtin_sense_sets() -> pd.DataFrame:
    """The built-in sense-labelled sentences: columns ``word``, ``sense``, ``sentence``."""
    return pd.read_csv(SENSE_SETS_CSV, dtype=str)


def builtin_words() -> list[str]:
    return sorted(builtin_sense_sets()["word"].unique())


def builtin_set(word: str) -> tuple[list[str], list[str]]:
    """``(sentences, sense labels)`` of the built-in set for ``word`` (empty lists if there is none)."""
    table = builtin_sense_sets()
    rows = table[table["word"] == word.strip().lower()]
    return list(rows["sentence"]), list(rows["sense"])


def parse_labelled_lines(text: str) -> tuple[list[str], list[str]]:
    """``(sentences, labels)`` from one sentence per line, each optionally prefixed ``label:``.

    A prefix is one to three short words before a colon and white space ("river: We sat on
    the bank."); digits only ("10: ...") and URL schemes ("https: ...") are not labels, and
    "At 10:30 we left." or "https://example.org" are sentences. A line without a prefix gets
    the label "" (unlabelled). Blank lines are skipped; text is taken in NFC (``nfc``).
    """
    sentences, labels = [], []
    for line in nfc(text).splitlines():
        if not line.strip():
            continue
        match = LABEL_PREFIX.match(line)
        if match and len(match.group(1)) <= MAX_LABEL_CHARS and not NOT_A_LABEL.fullmatch(match.group(1).strip()):
            labels.append(match.group(1).strip())
            sentences.append(match.group(2).strip())
        else:
            labels.append("")
            sentences.append(line.strip())
    return sentences, labels


def read_sentence_csv(data: bytes) -> tuple[list[str], list[str]]:
    """``(sentences, labels)`` from CSV bytes with a ``sentence`` column and an optional ``label`` column."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise AnalysisError(f"The file is not UTF-8 text (byte {err.start + 1} cannot be read): save it as UTF-8.") from err
    try:
        table = read_csv_text(text, "the CSV file")
        columns = {str(c).strip().lower(): c for c in table.columns}
        if "sentence" not in columns:
            raise CorpusError("The CSV file needs a column named `sentence` (and optionally one named `label`).")
        require_text_column(table, "sentence", "the CSV file")
    except (CorpusError, ValueError, pd.errors.ParserError) as err:
        raise AnalysisError(str(err).splitlines()[0] if isinstance(err, CorpusError) else
                            f"The file could not be read as CSV ({str(err).splitlines()[0][:120]}).") from err
    sentences = [nfc(str(s).strip()) for s in table[columns["sentence"]]]
    labels = [str(s).strip() for s in table[columns["label"]]] if "label" in columns else [""] * len(sentences)
    kept = [(s, label) for s, label in zip(sentences, labels, strict=True) if s]
    return [s for s, _ in kept], [label for _, label in kept]


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: split after ``.``, ``!`` or ``?`` followed by white space, and at blank lines."""
    return [s.strip() for s in SENTENCE_END.split(text) if s and s.strip()]


def sentences_with_word(documents: Iterable[tuple[str, str]], word: str) -> tuple[list[str], list[str]]:
    """``(sentences, labels)``: the sentences of each ``(text, label)`` document that contain ``word``."""
    pattern = word_pattern(word)
    sentences, labels = [], []
    for text, label in documents:
        for sentence in split_sentences(nfc(text)):
            if pattern.search(sentence):
                sentences.append(sentence)
                labels.append(label)
    return sentences, labels


def knn_chance_level(labels: Sequence[str]) -> float:
    """Expected leave-one-out 1-NN accuracy when the neighbour's label is unrelated to the point's:
    for a point of a label with ``n_c`` measured occurrences out of ``n``, ``(n_c − 1) / (n − 1)``,
    averaged over points (0.478 for 12 + 12). Only labels counted by ``separation`` count; NaN
    with fewer than two such labels."""
    measured, _ = measured_labels(labels)
    counts = Counter(label for label in labels if label in measured)
    n = sum(counts.values())
    if len(measured) < 2:
        return float("nan")
    return float(sum(c * (c - 1) for c in counts.values()) / (n * (n - 1)))


def _point_scores(x: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per point: 1-NN credit (share of its most similar other points, ties shared, with its label)
    and cosine silhouette; ``x`` ``[N, hidden]``."""
    from sklearn.metrics import silhouette_samples  # noqa: PLC0415 - scikit-learn's import cost, only when asked

    unit = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    similarity = unit @ unit.T
    np.fill_diagonal(similarity, -np.inf)
    nearest = np.isclose(similarity, similarity.max(axis=1, keepdims=True), rtol=0.0, atol=1e-6)
    same = labels[:, None] == labels[None, :]
    knn = (nearest & same).sum(axis=1) / nearest.sum(axis=1)
    return knn, silhouette_samples(x, labels, metric="cosine")


def separation_interval(
    vectors: np.ndarray, labels: list[str], *, resamples: int = 1000, level: float = 0.9, seed: int = 0
) -> pd.DataFrame:
    """Bootstrap interval (``level``, percentile) of the two separation scores at each layer.

    Resamples the occurrences' own scores (each point's 1-NN credit, ties shared, and its
    silhouette, computed once on all points) with replacement, so the interval shows how much
    the mean over so few points could move. Columns ``layer``, ``knn_low``, ``knn_high``,
    ``silhouette_low``, ``silhouette_high``; NaN where ``separation`` is NaN.
    """
    vectors, measured, keep, kept = _measured_points(vectors, labels)
    columns = ["layer", "knn_low", "knn_high", "silhouette_low", "silhouette_high"]
    nan = float("nan")
    if len(measured) < 2:
        return pd.DataFrame([[layer, nan, nan, nan, nan] for layer in range(vectors.shape[0])], columns=columns)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(kept), size=(resamples, len(kept)))
    tail = (1 - level) / 2 * 100
    rows = []
    for layer in range(vectors.shape[0]):
        knn, silhouette = _point_scores(vectors[layer][keep].astype(np.float64), kept)
        knn_bounds = np.percentile(knn[picks].mean(axis=1), [tail, 100 - tail])
        silhouette_bounds = np.percentile(silhouette[picks].mean(axis=1), [tail, 100 - tail])
        rows.append([layer, *knn_bounds, *silhouette_bounds])
    return pd.DataFrame(rows, columns=columns)


def token_positions(model: LoadedModel, sentences: Sequence[str], word: str) -> list[int]:
    """Token position (0 = first token, e.g. [CLS]) of the first piece of every occurrence of ``word``."""
    pattern = word_pattern(word)
    positions = []
    for sentence in sentences:
        encoded = model.tokenizer(sentence, return_offsets_mapping=True, return_special_tokens_mask=True)
        special = np.array(encoded["special_tokens_mask"], dtype=bool)
        for match in pattern.finditer(sentence):
            tokens = covering_tokens(encoded["offset_mapping"], special, match.span())
            if tokens:
                positions.append(tokens[0])
    return positions


def chance_sentence(knn: float, chance: float) -> str:
    """The end of a sentence comparing the 1-NN accuracy at hidden state 0 with its chance line, from the numbers."""
    if not (np.isfinite(knn) and np.isfinite(chance)):
        return "."
    if knn > chance + 5e-4:
        return f": 1-NN accuracy there is {knn:.3f}, against a chance line of {chance:.3f}."
    if knn >= chance - 5e-4:
        return f" and 1-NN accuracy there is at chance ({knn:.3f}; the chance line is {chance:.3f})."
    return (f" and 1-NN accuracy there is at or below chance: {knn:.3f}, under the chance line of {chance:.3f}. It falls "
            "below because occurrences at the same position have identical vectors and all tie as nearest neighbours, "
            "and an occurrence cannot be its own neighbour: among its tied neighbours its own sense has one occurrence "
            "fewer than each other sense.")
