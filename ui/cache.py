"""The app's Streamlit caches, in one place. Everything else calls ``core`` directly.

Keys are small and hashable (model name, text, numbers); tensors and large arrays
are never hashed. Cached objects are shared by every session, so they are
read-only (``Analysis`` freezes its arrays).
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections import deque
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import streamlit as st

from core import about
from core.attention import attention_view, norm_weighted, rollout
from core.contextuality import embed_corpus_and_contextuality
from core.effects import ablate_heads
from core.head_stats import analysis_statistics, corpus_statistics
from core.inference import Analysis, analyze
from core.models import LoadedModel, load_model
from core.predictions import MAX_TOP_K, NoLanguageModelHead, load_language_model, predict
from core.queries_keys import queries_and_keys
from ui.bounded_cache import BoundedCache

log = logging.getLogger(__name__)

MAX_MODELS = 3
MAX_ANALYSES = 64
# One 512-token analysis of a 12-layer, 12-head model holds about 150 MB of attention.
MAX_ANALYSIS_BYTES = 1_500_000_000


class _FirstComeFirstServed:
    """A re-entrant lock granted in arrival order (``threading.Lock`` wakes waiters in no set order).

    Around every model run: one forward pass at a time uses all of torch's threads instead of
    many sessions' passes splitting (and oversubscribing) the cores, and a page that asked first
    is answered first instead of every session finishing together at the end.
    """

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._queue: deque[int] = deque()
        self._owner: int | None = None
        self._depth = 0

    @contextmanager
    def turn(self):
        me = threading.get_ident()
        with self._condition:
            if self._owner == me:  # a model run inside a model run (e.g. analysis inside a derived result)
                self._depth += 1
            else:
                self._queue.append(me)
                self._condition.wait_for(lambda: self._owner is None and self._queue[0] == me)
                self._queue.popleft()
                self._owner, self._depth = me, 1
        try:
            yield
        finally:
            with self._condition:
                self._depth -= 1
                if self._depth == 0:
                    self._owner = None
                    self._condition.notify_all()


_model_runs = _FirstComeFirstServed()


def model_turn():
    """Context manager: wait for this process's turn to run a model (first come, first served)."""
    return _model_runs.turn()


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
    freeze_long_lived()
    return model


def freeze_long_lived() -> None:
    """Put every object alive now (imported libraries, loaded models, compiled UMAP) out of the cyclic garbage
    collector's reach (``gc.freeze``). Streamlit runs a full collection after every script run; without this
    it walks these ~650,000 objects each time, 0.25-0.4 CPU-s per run, most of a page view's cost.

    Garbage present now would be kept for good, so it is collected first, except while the collector is off:
    that is start-up (``ui.warmup``), where every object is still young, so even a young-generation pass would
    walk all ~800,000 of them (0.3 s) to find a few hundred bytes of garbage. Otherwise the first time only the
    young generations (instant), later (another model chosen while pages have run) a full collection, 0.2-0.4 s
    on top of a load that takes seconds. Frozen objects are still freed by reference counting."""
    if gc.isenabled():
        gc.collect(1 if gc.get_freeze_count() == 0 else 2)
    gc.freeze()


def _forget_results_of(name: str) -> None:
    """Drop every cached result computed by the old content of model ``name`` (results are keyed by name)."""
    log.info("model folder %s changed on disk: loading it again", name)
    for store in BoundedCache.instances():
        store.discard(lambda key: isinstance(key, tuple) and bool(key) and key[0] == name)
    for cached in (cached_head_stats, cached_language_model, cached_predictions):
        cached.clear()  # Streamlit's caches cannot drop entries by argument; a re-saved folder is rare


@st.cache_resource(show_spinner=False)
def bounded_store(name: str, max_entries: int, max_bytes: int) -> BoundedCache:
    """A process-wide cache bounded in entries and bytes, one per ``name``."""
    return BoundedCache(max_entries=max_entries, max_bytes=max_bytes)


def cached_analysis(model_name: str, text: str, max_tokens: int | None = None) -> Analysis:
    """One ``Analysis`` per (model, text, token limit), so changing a view never re-runs the model."""
    model = cached_model(model_name)
    store = bounded_store("analyses", MAX_ANALYSES, MAX_ANALYSIS_BYTES)
    return store.get_or_compute((model_name, text, max_tokens), lambda: in_model_turn(analyze, model, text, max_tokens=max_tokens))


# Derived attention (maxima page; reused by the attention and head-statistics pages).
# A 512-token norm-weighted result of a 12 × 12 model is about 150 MB (float32).
MAX_DERIVED_ENTRIES = 16
MAX_DERIVED_BYTES = 600_000_000


def analysis_for(model_name: str, text: str, max_tokens: int | None = None, ablation: tuple | None = None) -> Analysis:
    """``cached_analysis``, or with ``ablation`` (``(heads, method)`` from ``ui.ablation.knockout()``)
    ``cached_ablated_analysis``: the run every view of a page with an "Ablated run" toggle is computed from."""
    if ablation is None:
        return cached_analysis(model_name, text, max_tokens)
    heads, method = ablation
    return cached_ablated_analysis(model_name, text, max_tokens, tuple(heads), method)


MAX_ABLATED_ANALYSES = 32


def cached_ablated_analysis(model_name: str, text: str, max_tokens: int | None, heads: tuple, method: str) -> Analysis:
    """``core.effects.ablate_heads``: the ``Analysis`` of ``text`` with ``heads`` ((layer, head) pairs) knocked out."""
    if not heads:
        return cached_analysis(model_name, text, max_tokens)
    store = bounded_store("ablated-analyses", MAX_ABLATED_ANALYSES, MAX_ANALYSIS_BYTES)
    return store.get_or_compute(
        (model_name, text, max_tokens, tuple(heads), method),
        lambda: ablate_heads(cached_model(model_name), text, heads, method=method, max_tokens=max_tokens),
    )


def cached_rollout(model_name: str, text: str, max_tokens: int | None = None, ablation: tuple | None = None) -> np.ndarray:
    """``core.attention.rollout`` of ``analysis_for(model_name, text, max_tokens, ablation)``: read-only ``[layers, T, T]``.

    Pass the same ``max_tokens`` (and ``ablation``) as the analysis the page shows, so both have the same tokens.
    """
    analysis = analysis_for(model_name, text, max_tokens, ablation)
    store = bounded_store("rollouts", MAX_DERIVED_ENTRIES, MAX_DERIVED_BYTES)
    return store.get_or_compute((model_name, text, max_tokens, ablation), lambda: read_only(rollout(analysis)))


def cached_norm_weighted(model_name: str, text: str, max_tokens: int | None = None, ablation: tuple | None = None) -> np.ndarray:
    """``core.attention.norm_weighted`` of ``analysis_for(model_name, text, max_tokens, ablation)``: read-only
    ``[layers, heads, T, T]``. Of an ablated run it is computed from that run's hidden states; a knocked-out head
    keeps its weights and value norms there (ablation removes its output, not its attention).

    Raises ``core.heads.UnsupportedArchitecture`` (not cached) for models it cannot take apart.
    """
    model = cached_model(model_name)
    analysis = analysis_for(model_name, text, max_tokens, ablation)
    store = bounded_store("norm-weighted", MAX_DERIVED_ENTRIES, MAX_DERIVED_BYTES)
    return store.get_or_compute((model_name, text, max_tokens, ablation),
                                lambda: read_only(in_model_turn(norm_weighted, model, analysis)))


def in_model_turn(run, *args, **kwargs):
    """``run(*args, **kwargs)`` once it is this session's turn to use the model (see ``model_turn``)."""
    with model_turn():
        return run(*args, **kwargs)


def read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)  # shared by every session
    return array


# Head statistics page: small tables (one row per head), so Streamlit's data cache suits them.
MAX_HEAD_STATS = 64


@st.cache_data(max_entries=MAX_HEAD_STATS, show_spinner=False)
def cached_head_stats(model_name: str, text: str, max_tokens: int | None, weighting: str = "attention"):
    """``core.head_stats.analysis_statistics`` of one text: ``(table, roles)``.

    ``weighting``: ``"attention"`` or ``"norm-weighted"`` (raises ``UnsupportedArchitecture``, not cached).
    """
    matrices = cached_norm_weighted(model_name, text, max_tokens) if weighting == "norm-weighted" else None
    return analysis_statistics(cached_analysis(model_name, text, max_tokens), cached_model(model_name).tokenizer, matrices)


def cached_corpus_head_stats(model_name: str, texts: tuple[str, ...], max_tokens: int | None, progress=None):
    """``core.head_stats.corpus_statistics`` keyed by (model, texts, token limit).

    A bounded store rather than ``st.cache_data``: ``progress(done, total)`` draws into the
    page, and a cache that records page updates would replay them on a later hit.
    """
    model = cached_model(model_name)
    store = bounded_store("corpus-head-stats", MAX_HEAD_STATS, 50_000_000)
    return store.get_or_compute(
        (model_name, tuple(texts), max_tokens),
        lambda: in_model_turn(corpus_statistics, model, texts, max_tokens=max_tokens, progress=progress),
    )


# Drift page: every pooling of every hidden state of a corpus and its words' self-similarity, from one batched pass.
# 500 documents × 13 hidden states × 768 dims × 4 poolings (float32) is about 80 MB.
MAX_CORPUS_EMBEDDINGS = 8
MAX_CORPUS_EMBEDDING_BYTES = 400_000_000


def cached_corpus_embeddings(model_name: str, texts: tuple[str, ...], max_tokens: int | None = None, progress=None):
    """``core.drift.embed_corpus`` keyed by (model, texts, token limit): changing a plot option never re-runs the model.

    Computed with ``cached_contextuality``'s result in one pass (``_corpus_pass``). ``progress(done, total)`` is
    called only when the model runs.
    """
    store = bounded_store("corpus-embeddings", MAX_CORPUS_EMBEDDINGS, MAX_CORPUS_EMBEDDING_BYTES)
    return store.get_or_compute(
        (model_name, tuple(texts), max_tokens), lambda: _corpus_pass(model_name, texts, max_tokens, progress)[0]
    )


def _corpus_pass(model_name: str, texts: tuple[str, ...], max_tokens: int | None = None, progress=None):
    """``(CorpusEmbeddings, Contextuality)`` of ``core.contextuality.embed_corpus_and_contextuality``, each put in
    the store of its wrapper (``cached_corpus_embeddings``, ``cached_contextuality``), so the Drift page's two
    calls run the model once."""
    key = (model_name, tuple(texts), max_tokens)
    embeddings_store = bounded_store("corpus-embeddings", MAX_CORPUS_EMBEDDINGS, MAX_CORPUS_EMBEDDING_BYTES)
    contextuality_store = bounded_store("contextuality", MAX_CORPUS_EMBEDDINGS, MAX_CORPUS_EMBEDDING_BYTES)
    model = cached_model(model_name)
    with model_turn():
        # Another session may have run this pass, for the other wrapper, while this one waited for its turn.
        embeddings, context = embeddings_store.get(key), contextuality_store.get(key)
        if embeddings is None or context is None:
            embeddings, context = embed_corpus_and_contextuality(model, list(texts), max_tokens=max_tokens, progress=progress)
            embeddings_store.put(key, embeddings)
            contextuality_store.put(key, context)
    return embeddings, context


# Predictions page: the model with its language-model head, and its top-k predictions per text.
MAX_LANGUAGE_MODELS = 2


@st.cache_resource(max_entries=MAX_LANGUAGE_MODELS, show_spinner=False)
def cached_language_model(name: str):
    """``core.predictions.load_language_model`` of model ``name``, or the ``NoLanguageModelHead`` it raised.

    Having no head is a property of the checkpoint, so that answer is cached too (returned, not
    raised) instead of loading the weights again on every rerun.
    """
    try:
        return load_language_model(cached_model(name))
    except NoLanguageModelHead as err:
        return err.with_traceback(None)


@st.cache_resource(max_entries=MAX_ANALYSES, show_spinner=False)
def cached_predictions(model_name: str, text: str, max_tokens: int | None = None):
    """The top ``core.predictions.MAX_TOP_K`` predictions for the first ``max_tokens`` tokens of ``text``; pages cut
    them with ``.top(k)``, so changing k never re-runs the model."""
    language_model = cached_language_model(model_name)
    if isinstance(language_model, Exception):
        raise language_model
    return in_model_turn(predict, language_model, text, MAX_TOP_K, max_tokens=max_tokens)


# Attention page: the matrices a view shows, per (source, special tokens, word level), so
# changing layer, head, scale or palette only slices a cached array.
MAX_ATTENTION_VIEWS = 8
MAX_ATTENTION_VIEW_BYTES = 600_000_000


def cached_attention_view(model_name: str, text: str, max_tokens: int | None, source: str, special: str, words: bool,
                          ablation: tuple | None = None):
    """``core.attention.attention_view`` of ``source``: ``"raw"`` and ``"norm-weighted"`` give
    ``[layers, heads, n, n]``; ``"rollout"`` (no heads) gives ``[layers, 1, n, n]``. With ``ablation``
    (``(heads, method)`` from ``ui.ablation.knockout()``) the view is of the ablated run."""
    def compute():
        matrices = {
            "raw": lambda: None,
            "norm-weighted": lambda: cached_norm_weighted(model_name, text, max_tokens, ablation),
            "rollout": lambda: cached_rollout(model_name, text, max_tokens, ablation)[:, None],
        }[source]()
        return attention_view(analysis_for(model_name, text, max_tokens, ablation), matrices=matrices, special=special, words=words)

    store = bounded_store("attention-views", MAX_ATTENTION_VIEWS, MAX_ATTENTION_VIEW_BYTES)
    return store.get_or_compute((model_name, text, max_tokens, source, special, words, ablation), compute)


def cached_queries_keys(model_name: str, text: str, max_tokens: int | None = None, ablation: tuple | None = None):
    """``core.queries_keys.queries_and_keys``: ``(queries, keys)`` ``[layers, heads, T, d]`` for BertViz's neuron view
    (of the ablated run with ``ablation``)."""
    store = bounded_store("queries-keys", MAX_ATTENTION_VIEWS, MAX_ATTENTION_VIEW_BYTES)
    return store.get_or_compute(
        (model_name, text, max_tokens, ablation),
        lambda: in_model_turn(queries_and_keys, cached_model(model_name), analysis_for(model_name, text, max_tokens, ablation)),
    )


# Figures and the tables under them, per small key: a control that changes only one figure
# (in an ``st.fragment``) or a rerun with the same inputs does not rebuild the others.
MAX_FIGURES = 64
MAX_FIGURE_BYTES = 400_000_000


def cached_figure(model_name: str, key: tuple, build, ablation: tuple | None = None):
    """``build()`` once per model, ``ablation`` (``(heads, method)`` of the run drawn, or None) and ``key``
    (figure name, text, token limit and every option it depends on).

    The figure is shared by every session: never modify it (``ui.figures.fitted`` restyles a copy, kept on it).
    """
    return bounded_store("figures", MAX_FIGURES, MAX_FIGURE_BYTES).get_or_compute((model_name, ablation, *key), build)


def cached_contextuality(model_name: str, texts: tuple[str, ...], max_tokens: int | None = None, progress=None):
    """``core.contextuality.contextuality`` keyed by (model, texts, token limit): small tables. Computed with
    ``cached_corpus_embeddings``'s result in one pass (``_corpus_pass``). ``progress(done, total)`` is called only
    when the model runs."""
    store = bounded_store("contextuality", MAX_CORPUS_EMBEDDINGS, MAX_CORPUS_EMBEDDING_BYTES)
    return store.get_or_compute(
        (model_name, tuple(texts), max_tokens), lambda: _corpus_pass(model_name, texts, max_tokens, progress)[1]
    )


def cached_model_facts(model_name: str, text: str, max_tokens: int | None = None):
    """``core.about.model_facts`` for the sidebar's model and text. The part that is the same for every text
    (anisotropy: a pass over 8 short reference sentences) is computed once per model; the rest is a few sums."""
    model = cached_model(model_name)
    anisotropy = bounded_store("reference-anisotropy", MAX_MODELS, 1_000_000).get_or_compute(
        (model_name,), lambda: read_only(in_model_turn(about.reference_anisotropy, model)))
    store = bounded_store("model-facts", 32, 50_000_000)
    return store.get_or_compute(
        (model_name, text, max_tokens),
        lambda: about.model_facts(model, cached_analysis(model_name, text, max_tokens), anisotropy),
    )

