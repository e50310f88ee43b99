"""The app's Streamlit caches, in one place. Everything else calls ``core`` directly.

Keys are small and hashable (model name, text, numbers); tensors and large arrays
are never hashed. Cached objects are shared by every session, so they are
read-only (``Analysis`` freezes its arrays).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import streamlit as st

from core.attention import norm_weighted, rollout
from core.inference import Analysis, analyze
from core.models import LoadedModel, load_model
from ui.bounded_cache import BoundedCache

log = logging.getLogger("explorer")

MAX_MODELS = 3
MAX_ANALYSES = 64
# One 512-token analysis of a 12-layer, 12-head model holds about 150 MB of attention.
MAX_ANALYSIS_BYTES = 1_500_000_000


def model_signature(name: str) -> tuple:
    """What identifies the content of model ``name``: for a local folder, every file's name, size and
    modification time (config, weights, tokenizer); ``()`` for a hub id or the bundled model."""
    folder = Path(name).expanduser()
    if not folder.is_dir():
        return ()
    return tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.iterdir()) if p.is_file())


_SIGNATURES: dict[str, tuple] = {}  # the content each model name was last loaded from, in this process


def cached_model(name: str) -> LoadedModel:
    """One ``LoadedModel`` per name and content: a folder saved again (new config or weights) loads
    again, and every cached result of the old content is dropped."""
    signature = model_signature(name)
    if _SIGNATURES.get(name, signature) != signature:
        _forget_results_of(name)
    _SIGNATURES[name] = signature
    return _load_model(name, signature)


@st.cache_resource(max_entries=MAX_MODELS, show_spinner=False)
def _load_model(name: str, signature: tuple) -> LoadedModel:
    started = time.perf_counter()
    model = load_model(name)
    log.info("loaded model %s in %.1f s", name, time.perf_counter() - started)
    return model


def _forget_results_of(name: str) -> None:
    """Drop every cached result computed by the old content of model ``name`` (results are keyed by name)."""
    log.info("model folder %s changed on disk: loading it again", name)
    for store in BoundedCache.instances():
        store.discard(lambda key: isinstance(key, tuple) and bool(key) and key[0] == name)
    for cached in (cached_head_stats, cached_separation, cached_language_model, cached_predictions):
        cached.clear()  # Streamlit's caches cannot drop entries by argument; a re-saved folder is rare


@st.cache_resource(show_spinner=False)
def bounded_store(name: str, max_entries: int, max_bytes: int) -> BoundedCache:
    """A process-wide cache bounded in entries and bytes, one per ``name``."""
    return BoundedCache(max_entries=max_entries, max_bytes=max_bytes)


def cached_analysis(model_name: str, text: str, max_tokens: int | None = None) -> Analysis:
    """One ``Analysis`` per (model, text, token limit), so changing a view never re-runs the model."""
    model = cached_model(model_name)
    store = bounded_store("analyses", MAX_ANALYSES, MAX_ANALYSIS_BYTES)
    return store.get_or_compute((model_name, text, max_tokens), lambda: analyze(model, text, max_tokens=max_tokens))


# Derived attention (maxima page; reused by the attention and head-statistics pages).
# A 512-token norm-weighted result of a 12 × 12 model is about 150 MB (float32).
MAX_DERIVED_ENTRIES = 16
MAX_DERIVED_BYTES = 600_000_000


def cached_rollout(model_name: str, text: str, max_tokens: int | None = None) -> np.ndarray:
    """``core.attention.rollout`` of ``cached_analysis(model_name, text, max_tokens)``: read-only ``[layers, T, T]``.

    Pass the same ``max_tokens`` as the analysis the page shows, so both have the same tokens.
    """
    analysis = cached_analysis(model_name, text, max_tokens)
    store = bounded_store("rollouts", MAX_DERIVED_ENTRIES, MAX_DERIVED_BYTES)
    return store.get_or_compute((model_name, text, max_tokens), lambda: _read_only(rollout(analysis)))


def cached_norm_weighted(model_name: str, text: str, max_tokens: int | None = None) -> np.ndarray:
    """``core.attention.norm_weighted`` of ``cached_analysis(model_name, text, max_tokens)``: read-only ``[layers, heads, T, T]``.

    Raises ``core.heads.UnsupportedArchitecture`` (not cached) for models it cannot take apart.
    """
    model = cached_model(model_name)
    analysis = cached_analysis(model_name, text, max_tokens)
    store = bounded_store("norm-weighted", MAX_DERIVED_ENTRIES, MAX_DERIVED_BYTES)
    return store.get_or_compute((model_name, text, max_tokens), lambda: _read_only(norm_weighted(model, analysis)))


def _read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)  # shared by every session
    return array


# Head statistics page: small tables (one row per head), so Streamlit's data cache suits them.
MAX_HEAD_STATS = 64


@st.cache_data(max_entries=MAX_HEAD_STATS, show_spinner=False)
def cached_head_stats(model_name: str, text: str, max_tokens: int | None, weighting: str = "attention"):
    """``core.head_stats.analysis_statistics`` of one text: ``(table, roles)``.

    ``weighting``: ``"attention"`` or ``"norm-weighted"`` (raises ``UnsupportedArchitecture``, not cached).
    """
    from core.head_stats import analysis_statistics

    matrices = cached_norm_weighted(model_name, text, max_tokens) if weighting == "norm-weighted" else None
    return analysis_statistics(cached_analysis(model_name, text, max_tokens), cached_model(model_name).tokenizer, matrices)


def cached_corpus_head_stats(model_name: str, texts: tuple[str, ...], max_tokens: int | None, progress=None):
    """``core.head_stats.corpus_statistics`` keyed by (model, texts, token limit).

    A bounded store rather than ``st.cache_data``: ``progress(done, total)`` draws into the
    page, and a cache that records page updates would replay them on a later hit.
    """
    from core.head_stats import corpus_statistics

    model = cached_model(model_name)
    store = bounded_store("corpus-head-stats", MAX_HEAD_STATS, 50_000_000)
    return store.get_or_compute(
        (model_name, tuple(texts), max_tokens), lambda: corpus_statistics(model, texts, max_tokens=max_tokens, progress=progress)
    )


# Drift page: every pooling of every hidden state of a corpus, from one batched pass.
# 500 documents × 13 hidden states × 768 dims × 4 poolings (float32) is about 80 MB.
MAX_CORPUS_EMBEDDINGS = 8
MAX_CORPUS_EMBEDDING_BYTES = 400_000_000


def cached_corpus_embeddings(model_name: str, texts: tuple[str, ...], max_tokens: int | None = None, progress=None):
    """``core.drift.embed_corpus`` keyed by (model, texts, token limit): changing a plot option never re-runs the model.

    ``progress(done, total)`` is called only when the model runs.
    """
    from core.drift import embed_corpus

    model = cached_model(model_name)
    store = bounded_store("corpus-embeddings", MAX_CORPUS_EMBEDDINGS, MAX_CORPUS_EMBEDDING_BYTES)
    return store.get_or_compute(
        (model_name, tuple(texts), max_tokens), lambda: embed_corpus(model, texts, max_tokens=max_tokens, progress=progress)
    )


# Predictions page: the model with its language-model head, and its top-k predictions per text.
MAX_LANGUAGE_MODELS = 2


@st.cache_resource(max_entries=MAX_LANGUAGE_MODELS, show_spinner=False)
def cached_language_model(name: str):
    """``core.predictions.load_language_model`` of model ``name``, or the ``NoLanguageModelHead`` it raised.

    Having no head is a property of the checkpoint, so that answer is cached too (returned, not
    raised) instead of loading the weights again on every rerun.
    """
    from core.predictions import NoLanguageModelHead, load_language_model

    try:
        return load_language_model(cached_model(name))
    except NoLanguageModelHead as err:
        return err.with_traceback(None)


@st.cache_resource(max_entries=MAX_ANALYSES, show_spinner=False)
def cached_predictions(model_name: str, text: str):
    """The top ``core.predictions.MAX_TOP_K`` predictions for ``text``; pages cut them with ``.top(k)``,
    so changing k never re-runs the model."""
    from core.predictions import MAX_TOP_K, predict

    language_model = cached_language_model(model_name)
    if isinstance(language_model, Exception):
        raise language_model
    return predict(language_model, text, MAX_TOP_K)


# Attention page: the matrices a view shows, per (source, special tokens, word level), so
# changing layer, head, scale or palette only slices a cached array.
MAX_ATTENTION_VIEWS = 8
MAX_ATTENTION_VIEW_BYTES = 600_000_000


def cached_attention_view(model_name: str, text: str, max_tokens: int | None, source: str, special: str, words: bool):
    """``core.attention.attention_view`` of ``source``: ``"raw"`` and ``"norm-weighted"`` give
    ``[layers, heads, n, n]``; ``"rollout"`` (no heads) gives ``[layers, 1, n, n]``."""
    from core.attention import attention_view

    def compute():
        matrices = {
            "raw": lambda: None,
            "norm-weighted": lambda: cached_norm_weighted(model_name, text, max_tokens),
            "rollout": lambda: cached_rollout(model_name, text, max_tokens)[:, None],
        }[source]()
        return attention_view(cached_analysis(model_name, text, max_tokens), matrices=matrices, special=special, words=words)

    store = bounded_store("attention-views", MAX_ATTENTION_VIEWS, MAX_ATTENTION_VIEW_BYTES)
    return store.get_or_compute((model_name, text, max_tokens, source, special, words), compute)


def cached_queries_keys(model_name: str, text: str, max_tokens: int | None = None):
    """``core.queries_keys.queries_and_keys``: ``(queries, keys)`` ``[layers, heads, T, d]`` for BertViz's neuron view."""
    from core.queries_keys import queries_and_keys

    store = bounded_store("queries-keys", MAX_ATTENTION_VIEWS, MAX_ATTENTION_VIEW_BYTES)
    return store.get_or_compute(
        (model_name, text, max_tokens),
        lambda: queries_and_keys(cached_model(model_name), cached_analysis(model_name, text, max_tokens)),
    )


# Senses page: every occurrence of a word at every layer (one pass), then 2-D projections per layer.
# 2,000 occurrences × 13 layers × 768 dims (float32) is about 80 MB.
MAX_OCCURRENCE_SETS = 8
MAX_OCCURRENCE_BYTES = 400_000_000
MAX_PROJECTIONS = 128


def cached_occurrences(model_name: str, word: str, sentences: tuple[str, ...], progress=None):
    """``core.senses.occurrence_embeddings`` keyed by (model, word, sentences); ``progress(done, total)`` only when the model runs."""
    from core.senses import occurrence_embeddings

    store = bounded_store("occurrences", MAX_OCCURRENCE_SETS, MAX_OCCURRENCE_BYTES)
    return store.get_or_compute(
        (model_name, word, sentences),
        lambda: occurrence_embeddings(cached_model(model_name), list(sentences), word, progress=progress),
    )


def cached_projection(model_name: str, word: str, sentences: tuple[str, ...], layer: int, method: str) -> np.ndarray:
    """``core.projection.project`` of layer ``layer`` of ``cached_occurrences(...)``: read-only ``[N, 2]``, random state 0,
    so moving the layer slider never re-runs the model and a view is drawn the same way every time."""
    from core.projection import project

    occurrences = cached_occurrences(model_name, word, sentences)
    store = bounded_store("projections", MAX_PROJECTIONS, MAX_OCCURRENCE_BYTES)
    return store.get_or_compute(
        (model_name, word, sentences, layer, method),
        lambda: _read_only(project(occurrences.vectors[layer], method, random_state=0)),
    )


@st.cache_data(max_entries=MAX_PROJECTIONS, show_spinner=False)
def cached_separation(model_name: str, word: str, sentences: tuple[str, ...], labels: tuple[str, ...]):
    """``core.senses.separation`` of ``cached_occurrences(...)``, one label per occurrence: a small table per layer."""
    from core.senses import separation

    return separation(cached_occurrences(model_name, word, sentences).vectors, list(labels))


@st.cache_resource(show_spinner=False)
def start_umap_warmup():
    """Start compiling UMAP (numba, about 10 s) in a daemon thread, once per process; returns the ``threading.Thread``."""
    import threading

    from core.projection import warm_up_umap

    thread = threading.Thread(target=warm_up_umap, name="umap-warmup", daemon=True)
    thread.start()
    return thread
