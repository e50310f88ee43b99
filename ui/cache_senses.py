"""The Senses page's caches: one word's occurrences in many sentences, their 2-D maps (fitted, aligned to the
last hidden state), separation scores, and the UMAP compilation that waits for an idle server.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import streamlit as st

from core.alignment import align_layout
from core.projection import fit_projection, project, warm_up_umap
from core.senses import occurrence_embeddings, separation, separation_interval
from ui.cache import bounded_store, cached_model, freeze_long_lived, in_model_turn, read_only
from ui.idle import wait_until_idle, wake_idle_waiters

log = logging.getLogger(__name__)


# Senses page: every occurrence of a word at every layer (one pass), then 2-D projections per layer.
# 2,000 occurrences × 13 layers × 768 dims (float32) is about 80 MB.
MAX_OCCURRENCE_SETS = 8
MAX_OCCURRENCE_BYTES = 400_000_000
MAX_PROJECTIONS = 128


def cached_occurrences(model_name: str, word: str, sentences: tuple[str, ...], progress=None):
    """``core.senses.occurrence_embeddings`` keyed by (model, word, sentences); ``progress(done, total)`` only when the model runs."""
    store = bounded_store("occurrences", MAX_OCCURRENCE_SETS, MAX_OCCURRENCE_BYTES)
    return store.get_or_compute(
        (model_name, word, sentences),
        lambda: in_model_turn(occurrence_embeddings, cached_model(model_name), list(sentences), word, progress=progress),
    )


def cached_projection(model_name: str, word: str, sentences: tuple[str, ...], layer: int, method: str) -> np.ndarray:
    """``core.projection.project`` of layer ``layer`` of ``cached_occurrences(...)``: read-only ``[N, 2]``, random state 0,
    so moving the layer slider never re-runs the model and a view is drawn the same way every time."""
    occurrences = cached_occurrences(model_name, word, sentences)
    store = bounded_store("projections", MAX_PROJECTIONS, MAX_OCCURRENCE_BYTES)
    return store.get_or_compute(
        (model_name, word, sentences, layer, method),
        lambda: read_only(project(occurrences.vectors[layer], method, random_state=0)),
    )


MAX_FITTED_PROJECTIONS = 16


def cached_fitted_projection(model_name: str, word: str, sentences: tuple[str, ...], layer: int, method: str):
    """``core.projection.fit_projection`` of layer ``layer`` of ``cached_occurrences(...)`` (random state 0): a
    ``FittedProjection`` whose ``transform`` places a new occurrence into the same map. Keeps the fitted
    estimator, so fewer entries than ``cached_projection``."""
    occurrences = cached_occurrences(model_name, word, sentences)
    store = bounded_store("fitted-projections", MAX_FITTED_PROJECTIONS, MAX_OCCURRENCE_BYTES)
    return store.get_or_compute(
        (model_name, word, sentences, layer, method),
        lambda: fit_projection(occurrences.vectors[layer], method, random_state=0),
    )


def cached_separation(model_name: str, word: str, sentences: tuple[str, ...], labels: tuple[str, ...]):
    """``core.senses.separation`` of ``cached_occurrences(...)``, one label per occurrence: a small table per layer.
    (A bounded store, keyed by model name first, so a re-saved model folder drops it with the model's other results.)"""
    return bounded_store("separations", MAX_PROJECTIONS, 50_000_000).get_or_compute(
        (model_name, word, sentences, labels),
        lambda: separation(cached_occurrences(model_name, word, sentences).vectors, list(labels)))


_UMAP_WANTED = threading.Event()  # set by a page that shows UMAP: the warm-up stops waiting for an idle server


def start_umap_warmup(now: bool = False) -> threading.Thread:
    """Start compiling UMAP (numba, about 10 CPU-s holding the interpreter) in a daemon thread, once per process;
    returns the ``threading.Thread``. ``ui.warmup`` calls it after the bundled model is loaded.

    The thread first waits until no page has run for ten seconds (``ui.idle.wait_until_idle``), so the
    compilation never slows a page being drawn; ``now=True`` (the senses page about to show UMAP) ends that wait.
    (Not at a lower OS priority: the senses page waits for this thread, and a starved thread would make it wait longest.)
    """
    if now and not _UMAP_WANTED.is_set():
        _UMAP_WANTED.set()
        wake_idle_waiters()
    return _umap_warmup_thread()


@st.cache_resource(show_spinner=False)
def _umap_warmup_thread() -> threading.Thread:
    def warm_up():
        wait_until_idle(wake=_UMAP_WANTED)
        log.info("compiling UMAP (%s)", "a page asked for it" if _UMAP_WANTED.is_set() else "no page is running")
        started = time.perf_counter()
        warm_up_umap()
        log.info("UMAP compiled in %.1f s", time.perf_counter() - started)
        freeze_long_lived()  # numba's compiled functions and their ~190,000 objects live as long as the process

    thread = threading.Thread(target=warm_up, name="umap-warmup", daemon=True)
    thread.start()
    return thread


def cached_aligned_projection(model_name: str, word: str, sentences: tuple[str, ...], layer: int, method: str) -> np.ndarray:
    """``cached_projection`` of ``layer`` rotated, reflected, shifted and scaled (``core.alignment.align_layout``)
    onto the same method's layout of the last hidden state, so every layer is drawn in one frame and
    moving the slider moves the same points instead of redrawing them."""
    last = cached_occurrences(model_name, word, sentences).num_layers
    reference = cached_projection(model_name, word, sentences, last, method)
    if layer == last:
        return reference
    store = bounded_store("aligned-projections", MAX_PROJECTIONS, MAX_OCCURRENCE_BYTES)
    return store.get_or_compute(
        (model_name, word, sentences, layer, method),
        lambda: read_only(align_layout(cached_projection(model_name, word, sentences, layer, method), reference)),
    )


def cached_separation_interval(model_name: str, word: str, sentences: tuple[str, ...], labels: tuple[str, ...]):
    """``core.senses.separation_interval`` of ``cached_occurrences(...)`` (90% bootstrap), one label per occurrence."""
    return bounded_store("separation-intervals", MAX_PROJECTIONS, 50_000_000).get_or_compute(
        (model_name, word, sentences, labels),
        lambda: separation_interval(cached_occurrences(model_name, word, sentences).vectors, list(labels)))
