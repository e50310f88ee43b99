"""The app's caches of models and of results for one text or corpus. Everything else calls ``core`` directly.

A model name is resolved to a model once per call (``model_and_run``); every result is kept in the one store
(``ui.store``) under its ``core.model.run.Run`` and the view's own parameters. Cached objects are shared by every
session, so they are read-only (``Analysis`` freezes its arrays).
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

from core.attention_heads.attention import attention_view, norm_weighted, rollout
from core.attention_heads.head_statistics import analysis_statistics, corpus_statistics
from core.attention_heads.neuron_view import queries_and_keys
from core.causal.effects import ablate_heads
from core.model.inference import Analysis, analyze
from core.model.models import LoadedModel, load_model
from core.model.run import Ablation, Run
from core.outputs.predictions import MAX_TOP_K, NoLanguageModelHead, load_language_model, predict
from core.representations.contextuality import embed_corpus_and_contextuality
from core.teaching import about
from ui.store import cached, results

log = logging.getLogger(__name__)

MAX_MODELS = 3


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
    return model_and_run(name)[0]


def model_and_run(name: str, texts: tuple[str, ...] = (), max_tokens: int | None = None,
                  ablation: tuple | Ablation | None = None) -> tuple[LoadedModel, Run]:
    """Model ``name`` (loaded once per name and content, ``cached_model``) and the ``Run`` of ``texts`` through
    it: the one place a model name becomes a model. ``ablation``: ``(heads, method)`` from ``ui.ablation.knockout()``
    (or an ``Ablation``), None for the plain run."""
    run = run_of(name, texts, max_tokens, ablation)
    return load_cached_model(name, run.revision), run


def run_of(name: str, texts: tuple[str, ...] = (), max_tokens: int | None = None,
           ablation: tuple | Ablation | None = None) -> Run:
    """The ``Run`` of ``texts`` through model ``name``, without loading it; its ``revision`` is the model's content
    (``model_signature``), and a folder whose content changed since the last run drops the old content's results."""
    signature = model_signature(name)
    if _SIGNATURES.get(name, signature) != signature:
        _forget_results_of(name)
    _SIGNATURES[name] = signature
    if ablation is not None and not isinstance(ablation, Ablation):
        ablation = Ablation.of(*ablation)
    return Run(name, tuple(texts), max_tokens, ablation, signature)


@st.cache_resource(max_entries=MAX_MODELS, show_spinner=False)
def load_cached_model(name: str, signature: tuple) -> LoadedModel:
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
    """Drop every cached result computed by the old content of model ``name`` (the store's one rule)."""
    log.info("model folder %s changed on disk: loading it again", name)
    results().forget(name)
    cached_language_model.clear()  # a model cache: Streamlit's caches cannot drop entries by argument


def cached_analysis(model_name: str, text: str, max_tokens: int | None = None) -> Analysis:
    """One ``Analysis`` per (model, text, token limit), so changing a view never re-runs the model."""
    return analysis_of(*model_and_run(model_name, (text,), max_tokens))


def analysis_of(model: LoadedModel, run: Run) -> Analysis:
    """The ``Analysis`` of ``run`` (one text) through ``model`` (``model_and_run``'s): ``analyze``, or with
    ``run.ablation`` ``core.causal.effects.ablate_heads``; cached."""
    if run.ablation is None:
        return cached("analyses", run, lambda: in_model_turn(analyze, model, run.text, max_tokens=run.max_tokens))
    heads, method = run.ablation.heads, run.ablation.method
    return cached("ablated-analyses", run,
                  lambda: ablate_heads(model, run.text, heads, method=method, max_tokens=run.max_tokens))


def analysis_for(model_name: str, text: str, max_tokens: int | None = None, ablation: tuple | None = None) -> Analysis:
    """``cached_analysis``, or with ``ablation`` (``(heads, method)`` from ``ui.ablation.knockout()``)
    ``cached_ablated_analysis``: the run every view of a page with an "Ablated run" toggle is computed from."""
    return analysis_of(*model_and_run(model_name, (text,), max_tokens, ablation))


def cached_ablated_analysis(model_name: str, text: str, max_tokens: int | None, heads: tuple, method: str) -> Analysis:
    """``core.causal.effects.ablate_heads``: the ``Analysis`` of ``text`` with ``heads`` ((layer, head) pairs) knocked out."""
    return analysis_of(*model_and_run(model_name, (text,), max_tokens, (heads, method)))


def cached_rollout(model_name: str, text: str, max_tokens: int | None = None, ablation: tuple | None = None) -> np.ndarray:
    """``core.attention_heads.attention.rollout`` of ``analysis_for(model_name, text, max_tokens, ablation)``: read-only ``[layers, T, T]``.

    Pass the same ``max_tokens`` (and ``ablation``) as the analysis the page shows, so both have the same tokens.
    """
    return _rollout(*model_and_run(model_name, (text,), max_tokens, ablation))


def _rollout(model: LoadedModel, run: Run) -> np.ndarray:
    return cached("rollouts", run, lambda: read_only(rollout(analysis_of(model, run))))


def cached_norm_weighted(model_name: str, text: str, max_tokens: int | None = None, ablation: tuple | None = None) -> np.ndarray:
    """``core.attention_heads.attention.norm_weighted`` of ``analysis_for(model_name, text, max_tokens, ablation)``: read-only
    ``[layers, heads, T, T]``. Of an ablated run it is computed from that run's hidden states; a knocked-out head
    keeps its weights and value norms there (ablation removes its output, not its attention).

    Raises ``core.attention_heads.inside_head.UnsupportedArchitecture`` (not cached) for models it cannot take apart.
    """
    return _norm_weighted(*model_and_run(model_name, (text,), max_tokens, ablation))


def _norm_weighted(model: LoadedModel, run: Run) -> np.ndarray:
    analysis = analysis_of(model, run)
    return cached("norm-weighted", run, lambda: read_only(in_model_turn(norm_weighted, model, analysis)))


def in_model_turn(run, *args, **kwargs):
    """``run(*args, **kwargs)`` once it is this session's turn to use the model (see ``model_turn``)."""
    with model_turn():
        return run(*args, **kwargs)


def read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)  # shared by every session
    return array


def cached_head_stats(model_name: str, text: str, max_tokens: int | None, weighting: str = "attention"):
    """``core.attention_heads.head_statistics.analysis_statistics`` of one text: ``(table, roles)`` (small tables, one row per head).

    ``weighting``: ``"attention"`` or ``"norm-weighted"`` (raises ``UnsupportedArchitecture``, not cached).
    """
    model, run = model_and_run(model_name, (text,), max_tokens)

    def compute():
        matrices = _norm_weighted(model, run) if weighting == "norm-weighted" else None
        return analysis_statistics(analysis_of(model, run), model.tokenizer, matrices)

    return cached("head-stats", run, compute, (weighting,))


def cached_corpus_head_stats(model_name: str, texts: tuple[str, ...], max_tokens: int | None, progress=None):
    """``core.attention_heads.head_statistics.corpus_statistics`` keyed by (model, texts, token limit).

    A bounded store rather than ``st.cache_data``: ``progress(done, total)`` draws into the
    page, and a cache that records page updates would replay them on a later hit.
    """
    model, run = model_and_run(model_name, tuple(texts), max_tokens)
    return cached("corpus-head-stats", run,
                  lambda: in_model_turn(corpus_statistics, model, texts, max_tokens=max_tokens, progress=progress))


# Drift page: every pooling of every hidden state of a corpus and its words' self-similarity, from one batched pass.


def cached_corpus_embeddings(model_name: str, texts: tuple[str, ...], max_tokens: int | None = None, progress=None):
    """``core.representations.drift.embed_corpus`` keyed by (model, texts, token limit): changing a plot option never re-runs the model.

    Computed with ``cached_contextuality``'s result in one pass (``_corpus_pass``). ``progress(done, total)`` is
    called only when the model runs.
    """
    model, run = model_and_run(model_name, tuple(texts), max_tokens)
    return cached("corpus-embeddings", run, lambda: _corpus_pass(model, run, progress)[0])


def _corpus_pass(model: LoadedModel, run: Run, progress=None):
    """``(CorpusEmbeddings, Contextuality)`` of ``core.representations.contextuality.embed_corpus_and_contextuality``, each put on
    the shelf of its wrapper (``cached_corpus_embeddings``, ``cached_contextuality``), so the Drift page's two
    calls run the model once."""
    store = results()
    with model_turn():
        # Another session may have run this pass, for the other wrapper, while this one waited for its turn.
        embeddings, context = store.get("corpus-embeddings", run), store.get("contextuality", run)
        if embeddings is None or context is None:
            embeddings, context = embed_corpus_and_contextuality(model, list(run.texts), max_tokens=run.max_tokens,
                                                                 progress=progress)
            store.put("corpus-embeddings", run, (), embeddings)
            store.put("contextuality", run, (), context)
    return embeddings, context


# Predictions page: the model with its language-model head, and its top-k predictions per text.
MAX_LANGUAGE_MODELS = 2


@st.cache_resource(max_entries=MAX_LANGUAGE_MODELS, show_spinner=False)
def cached_language_model(name: str):
    """``core.outputs.predictions.load_language_model`` of model ``name``, or the ``NoLanguageModelHead`` it raised.

    Having no head is a property of the checkpoint, so that answer is cached too (returned, not
    raised) instead of loading the weights again on every rerun.
    """
    try:
        return load_language_model(cached_model(name))
    except NoLanguageModelHead as err:
        return err.with_traceback(None)


def cached_predictions(model_name: str, text: str, max_tokens: int | None = None):
    """The top ``core.outputs.predictions.MAX_TOP_K`` predictions for the first ``max_tokens`` tokens of ``text``; pages cut
    them with ``.top(k)``, so changing k never re-runs the model."""
    run = run_of(model_name, (text,), max_tokens)
    language_model = cached_language_model(model_name)
    if isinstance(language_model, Exception):
        raise language_model
    return cached("predictions", run,
                  lambda: in_model_turn(predict, language_model, text, MAX_TOP_K, max_tokens=max_tokens))


# Attention page: the matrices a view shows, per (source, special tokens, word level), so
# changing layer, head, scale or palette only slices a cached array.


def cached_attention_view(model_name: str, text: str, max_tokens: int | None, source: str, special: str, words: bool,
                          ablation: tuple | None = None):
    """``core.attention_heads.attention.attention_view`` of ``source``: ``"raw"`` and ``"norm-weighted"`` give
    ``[layers, heads, n, n]``; ``"rollout"`` (no heads) gives ``[layers, 1, n, n]``. With ``ablation``
    (``(heads, method)`` from ``ui.ablation.knockout()``) the view is of the ablated run."""
    model, run = model_and_run(model_name, (text,), max_tokens, ablation)

    def compute():
        matrices = {
            "raw": lambda: None,
            "norm-weighted": lambda: _norm_weighted(model, run),
            "rollout": lambda: _rollout(model, run)[:, None],
        }[source]()
        return attention_view(analysis_of(model, run), matrices=matrices, special=special, words=words)

    return cached("attention-views", run, compute, (source, special, words))


def cached_queries_keys(model_name: str, text: str, max_tokens: int | None = None, ablation: tuple | None = None):
    """``core.attention_heads.neuron_view.queries_and_keys``: ``(queries, keys)`` ``[layers, heads, T, d]`` for BertViz's neuron view
    (of the ablated run with ``ablation``)."""
    model, run = model_and_run(model_name, (text,), max_tokens, ablation)
    return cached("queries-keys", run, lambda: in_model_turn(queries_and_keys, model, analysis_of(model, run)))


# Figures and the tables under them, per small key: a control that changes only one figure
# (in an ``st.fragment``) or a rerun with the same inputs does not rebuild the others.


def cached_figure(model_name: str, key: tuple, build, ablation: tuple | None = None):
    """``build()`` once per model, ``ablation`` (``(heads, method)`` of the run drawn, or None) and ``key``
    (figure name, text, token limit and every option it depends on).

    The figure is shared by every session: never modify it (``ui.figures.fitted`` restyles a copy, kept on it).
    """
    return cached("figures", run_of(model_name, (), None, ablation), build, tuple(key))


def cached_contextuality(model_name: str, texts: tuple[str, ...], max_tokens: int | None = None, progress=None):
    """``core.representations.contextuality.contextuality`` keyed by (model, texts, token limit): small tables. Computed with
    ``cached_corpus_embeddings``'s result in one pass (``_corpus_pass``). ``progress(done, total)`` is called only
    when the model runs."""
    model, run = model_and_run(model_name, tuple(texts), max_tokens)
    return cached("contextuality", run, lambda: _corpus_pass(model, run, progress)[1])


def cached_model_facts(model_name: str, text: str, max_tokens: int | None = None):
    """``core.teaching.about.model_facts`` for the sidebar's model and text. The part that is the same for every text
    (anisotropy: a pass over 8 short reference sentences) is computed once per model; the rest is a few sums."""
    model, run = model_and_run(model_name, (text,), max_tokens)
    anisotropy = cached("reference-anisotropy", Run(model_name, revision=run.revision),
                        lambda: read_only(in_model_turn(about.reference_anisotropy, model)))
    return cached("model-facts", run, lambda: about.model_facts(model, analysis_of(model, run), anisotropy))

