"""How far each layer moves whole documents away from their static embeddings.

One batched pass over a corpus (``embed_corpus``) keeps, for every document and
every hidden state ``0..L``, one pooled vector per pooling method. Everything
else (similarity to the static layer or to the previous layer, the anisotropy
baseline, the first token's static vs contextual vector) is computed from those vectors without
running the model again.

Hidden states are numbered as in ``hidden_states`` (see ``core.model.layers``): 0 is the embedding
layer's output (word + position (+ token-type) embeddings, after LayerNorm for BERT), k = 1..L
is the output of layer (block) k − 1. For GPT-2 the last hidden state has ``ln_f`` applied.

A document's cosine to its own hidden state 0 measures the whole transformation (attention, the
feed-forward layers, LayerNorm), not how much its words depend on their context; for that see
``core.representations.contextuality``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.maths.similarity import cosine
from core.model.analysis import Analysis
from core.model.inference import iter_analyses
from core.model.models import LoadedModel

POOLINGS = {
    "mean": "mean over all tokens (attention-mask weighted, special tokens included, as sentence-transformers does)",
    "mean_no_special": "mean over the tokens of the text only (special tokens such as [CLS] and [SEP] excluded)",
    "cls": "hidden state of the first token ([CLS] for BERT-style models; a decoder has no [CLS])",
    "max": "maximum over tokens, per dimension (special tokens included)",
}
REFERENCES = {
    "static": "static → layer: hidden state k against the embedding layer's output (hidden_states[0])",
    "previous": "layer → layer: hidden state k against hidden state k − 1",
}
DEFAULT_BATCH_SIZE = 16


@dataclass(frozen=True, eq=False)
class CorpusEmbeddings:
    """Pooled hidden states of a corpus (``N`` documents, ``L`` layers, hidden size ``D``).

    ``pooled[p]``: float32 ``[N, L + 1, D]`` for each pooling ``p`` in ``POOLINGS``.
    ``pooler_output``: ``[N, D]`` for models whose checkpoint has pooler weights (a dense + tanh
    layer on the last [CLS] state, trained or not: see ``LoadedModel.pooler_trained``; it is not
    the [CLS] hidden state), else None.
    ``num_input_tokens``: tokens of each document before truncation; ``num_tokens``: tokens
    the model read; ``truncated``: bool ``[N]``.
    """

    model_name: str
    is_decoder: bool
    pooled: dict[str, np.ndarray]
    pooler_output: np.ndarray | None
    num_input_tokens: np.ndarray
    num_tokens: np.ndarray
    truncated: np.ndarray

    def __post_init__(self) -> None:
        for array in (*self.pooled.values(), self.pooler_output, self.num_input_tokens, self.num_tokens, self.truncated):
            if array is not None:
                array.setflags(write=False)

    @property
    def num_documents(self) -> int:
        return self.truncated.shape[0]

    @property
    def num_layers(self) -> int:
        return next(iter(self.pooled.values())).shape[1] - 1


def pool_hidden_states(hidden_states: np.ndarray, special_mask: np.ndarray, pooling: str) -> np.ndarray:
    """``[L + 1, T, D]`` hidden states of one text (no padding) → ``[L + 1, D]``.

    ``mean_no_special`` falls back to all tokens when every token is special.
    """
    if pooling == "mean":
        return hidden_states.mean(axis=1)
    if pooling == "mean_no_special":
        keep = ~special_mask if (~special_mask).any() else np.ones_like(special_mask)
        return hidden_states[:, keep].mean(axis=1)
    if pooling == "cls":
        return hidden_states[:, 0]
    if pooling == "max":
        return hidden_states.max(axis=1)
    raise ValueError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}")


class CorpusEmbeddingsAccumulator:
    """Pools the analyses of one pass over ``num_documents`` documents (any order) into ``CorpusEmbeddings``.

    ``add(index, analysis)`` for every document, then ``result()`` once: the result freezes the arrays.
    """

    def __init__(self, model: LoadedModel, num_documents: int) -> None:
        shape = (num_documents, model.num_layers + 1, model.hidden_size)
        self._model_name, self._is_decoder = model.name, model.is_decoder
        self._pooled = {p: np.zeros(shape, dtype=np.float32) for p in POOLINGS}
        self._pooler = np.zeros((num_documents, model.hidden_size), dtype=np.float32) if model.has_pooler else None
        self._num_input_tokens = np.zeros(num_documents, dtype=np.int64)
        self._num_tokens = np.zeros(num_documents, dtype=np.int64)
        self._truncated = np.zeros(num_documents, dtype=bool)

    def add(self, index: int, analysis: Analysis) -> None:
        for p in POOLINGS:
            self._pooled[p][index] = pool_hidden_states(analysis.hidden_states, analysis.special_mask, p)
        if self._pooler is not None and analysis.pooler_output is not None:
            self._pooler[index] = analysis.pooler_output
        self._num_input_tokens[index] = analysis.num_input_tokens
        self._num_tokens[index] = analysis.num_tokens
        self._truncated[index] = analysis.truncated

    def result(self) -> CorpusEmbeddings:
        return CorpusEmbeddings(self._model_name, self._is_decoder, self._pooled, self._pooler,
                                self._num_input_tokens, self._num_tokens, self._truncated)


def embed_corpus(
    model: LoadedModel,
    documents: Sequence[str],
    *,
    max_tokens: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Callable[[int, int], None] | None = None,
) -> CorpusEmbeddings:
    """Run ``model`` over ``documents`` once (length-sorted batches, dynamic padding) and pool every layer.

    Raises ``AnalysisError`` for an empty document. ``core.representations.contextuality.embed_corpus_and_contextuality``
    gives this and ``contextuality`` from one pass.
    """
    accumulator = CorpusEmbeddingsAccumulator(model, len(documents))
    run_over_corpus(model, documents, [accumulator], max_tokens=max_tokens, batch_size=batch_size, progress=progress)
    return accumulator.result()


def run_over_corpus(
    model: LoadedModel,
    documents: Sequence[str],
    accumulators: Sequence,
    *,
    max_tokens: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Callable[[int, int], None] | None = None,
) -> None:
    """One pass of ``model`` over ``documents`` (length-sorted batches, no attention weights), each document's analysis
    handed to every accumulator's ``add(index, analysis)`` (``CorpusEmbeddingsAccumulator``,
    ``core.representations.contextuality.ContextualityAccumulator``)."""
    if len(documents) == 0:
        raise ValueError("the corpus has no documents")
    for index, analysis in iter_analyses(
        model, list(documents), max_tokens=max_tokens, batch_size=batch_size, attentions=False, progress=progress
    ):
        for accumulator in accumulators:
            accumulator.add(index, analysis)


def _check(reference: str, pooling: str) -> None:
    if reference not in REFERENCES:
        raise ValueError(f"unknown reference {reference!r}; choose one of {', '.join(REFERENCES)}")
    if pooling not in POOLINGS:
        raise ValueError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}")


def _reference_layers(num_layers: int, reference: str) -> np.ndarray:
    """For layers k = 1..L, the hidden-state index each is compared with (0, or k − 1)."""
    layers = np.arange(1, num_layers + 1)
    return np.zeros_like(layers) if reference == "static" else layers - 1


def similarity_table(embeddings: CorpusEmbeddings, *, reference: str = "static", pooling: str = "mean") -> pd.DataFrame:
    """Long table: ``document`` (index), ``layer`` (1..L), ``cosine_similarity`` of layer k with its reference."""
    _check(reference, pooling)
    vectors = embeddings.pooled[pooling]  # [N, L + 1, D]
    layers = np.arange(1, embeddings.num_layers + 1)
    similarity = cosine(vectors[:, layers], vectors[:, _reference_layers(embeddings.num_layers, reference)])  # [N, L]
    n = embeddings.num_documents
    return pd.DataFrame(
        {
            "document": np.repeat(np.arange(n), len(layers)),
            "layer": np.tile(layers, n),
            "cosine_similarity": similarity.reshape(-1),
        }
    )


def _mean_cross_document_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Mean over ordered pairs i ≠ j of cos(a[i], b[j]); ``a``, ``b``: ``[N, D]``, N ≥ 2."""
    unit_a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    unit_b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    matrix = unit_a.astype(np.float64) @ unit_b.astype(np.float64).T
    n = matrix.shape[0]
    return float((matrix.sum() - np.trace(matrix)) / (n * (n - 1)))


def baseline_table(embeddings: CorpusEmbeddings, *, reference: str = "static", pooling: str = "mean") -> pd.DataFrame:
    """Per layer k = 1..L, what different documents give (needs at least 2 documents).

    ``anisotropy``: mean cosine between different documents within layer k (Ethayarajh 2019).
    ``baseline``: mean cosine between document i's reference layer and document j's layer k,
    i ≠ j: the same comparison as ``similarity_table`` but across documents, so
    ``cosine_similarity − baseline`` is how much more a document resembles its own
    reference than another document's. For layers sharing one direction both are high.
    """
    _check(reference, pooling)
    vectors = embeddings.pooled[pooling]
    if embeddings.num_documents < 2:
        raise ValueError("the baseline needs at least two documents")
    layers = np.arange(1, embeddings.num_layers + 1)
    references = _reference_layers(embeddings.num_layers, reference)
    return pd.DataFrame(
        {
            "layer": layers,
            "anisotropy": [_mean_cross_document_cosine(vectors[:, k], vectors[:, k]) for k in layers],
            "baseline": [_mean_cross_document_cosine(vectors[:, r], vectors[:, k]) for r, k in zip(references, layers)],
        }
    )


def cls_table(embeddings: CorpusEmbeddings) -> pd.DataFrame:
    """Per document: the first token's static vector (hidden_states[0]) against its last hidden state.
    Columns ``document``, ``comparison``, ``cosine_similarity``.

    ``pooler_output`` is deliberately not compared: it lives in a different space (a dense + tanh
    layer's output), so its cosine with a hidden state measures no drift.
    """
    first = embeddings.pooled["cls"]  # [N, L + 1, D]
    n = embeddings.num_documents
    return pd.DataFrame(
        {
            "document": np.arange(n),
            "comparison": f"hidden_states[0] vs hidden_states[{embeddings.num_layers}] (last layer)",
            "cosine_similarity": cosine(first[:, 0], first[:, -1]),
        }
    )


def layer_similarity(
    model: LoadedModel,
    documents: list[str],
    *,
    reference: str = "static",
    pooling: str = "mean",
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_tokens: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Cosine similarity of each document's pooled layer k (1..L) with its reference.

    ``reference``: ``"static"`` (hidden_states[0], the embedding layer's output) or
    ``"previous"`` (layer k − 1). ``pooling``: one of ``POOLINGS``. Returns a long
    table with columns ``document`` (index into ``documents``), ``layer``, ``cosine_similarity``.
    """
    _check(reference, pooling)
    embeddings = embed_corpus(model, documents, max_tokens=max_tokens, batch_size=batch_size, progress=progress)
    return similarity_table(embeddings, reference=reference, pooling=pooling)


def drift_table(embeddings: CorpusEmbeddings, *, reference: str = "static", pooling: str = "mean") -> pd.DataFrame:
    """``similarity_table`` with, per layer, ``baseline`` and ``anisotropy`` (see ``baseline_table``) and
    ``adjusted_similarity`` = ``cosine_similarity − baseline``; the three are NaN for a single document."""
    table = similarity_table(embeddings, reference=reference, pooling=pooling)
    if embeddings.num_documents < 2:
        return table.assign(baseline=np.nan, anisotropy=np.nan, adjusted_similarity=np.nan)
    table = table.merge(baseline_table(embeddings, reference=reference, pooling=pooling), on="layer", how="left")
    return table.assign(adjusted_similarity=table["cosine_similarity"] - table["baseline"])


ISOTROPIC_BELOW = 0.2
SHARED_DIRECTION_FROM = 0.5


def anisotropy_level(value: float) -> str:
    """How anisotropic a layer whose unrelated vectors have mean cosine ``value`` is, in words."""
    if value < ISOTROPIC_BELOW:
        return "nearly isotropic: unrelated vectors are close to orthogonal, so a cosine there is not inflated by a shared direction"
    if value >= SHARED_DIRECTION_FROM:
        return "anisotropic: its vectors share one direction, so even unrelated texts have a high cosine there"
    return "somewhat anisotropic: unrelated vectors still share part of one direction"


def baseline_sentences(baseline: pd.DataFrame, token_anisotropy: pd.DataFrame | None = None, *, pooling: str = "mean") -> str:
    """The anisotropy baseline in words, written from the measured numbers.

    ``baseline``: ``baseline_table`` rows (``layer`` 1..L, ``anisotropy``) for ``pooling``;
    ``token_anisotropy``: optional rows ``layer``, ``anisotropy`` of single words (random words
    from different documents, ``core.representations.contextuality``).
    """
    rows = baseline.dropna(subset=["anisotropy"]).sort_values("layer")
    if rows.empty:
        return "The baseline compares different documents, so it needs at least two."
    first, last = rows.iloc[0], rows.iloc[-1]
    peak = rows.loc[rows["anisotropy"].idxmax()]
    text = (
        f"With {pooling} pooling, different documents have a mean cosine of {first.anisotropy:.3f} at hidden state "
        f"{int(first.layer)}, {peak.anisotropy:.3f} at most (hidden state {int(peak.layer)}) and {last.anisotropy:.3f} "
        f"at hidden state {int(last.layer)}, the last: the last layer is {anisotropy_level(float(last.anisotropy))}."
    )
    if last.anisotropy < first.anisotropy - 0.1:
        text += (
            " Here anisotropy falls towards the top, unlike the pretrained BERT, ELMo and GPT-2 that Ethayarajh (2019) "
            "measured, where it grows in the upper layers: do not carry his numbers over to this model."
        )
    elif last.anisotropy > first.anisotropy + 0.1:
        text += " Here anisotropy grows towards the top, as Ethayarajh (2019) found for pretrained BERT, ELMo and GPT-2."
    if token_anisotropy is not None:
        words = token_anisotropy.dropna(subset=["anisotropy"]).sort_values("layer")
        words = words[words["layer"] >= 1]
        if not words.empty:
            text += (
                f" Ethayarajh's own baseline is single words, not pooled documents: random words from different "
                f"documents have a mean cosine of {words.iloc[0].anisotropy:.3f} at hidden state "
                f"{int(words.iloc[0].layer)} and {words.iloc[-1].anisotropy:.3f} at hidden state "
                f"{int(words.iloc[-1].layer)} (dash-dotted line)."
            )
    return text
