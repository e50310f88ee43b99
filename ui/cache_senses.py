"""The Senses page's caches: one word's occurrences in many sentences, their 2-D maps (fitted, aligned to the
last hidden state), separation scores, and the UMAP compilation that waits for an idle server.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import streamlit as st

from core.maths.alignment import align_layout
from core.maths.projection import fit_projection, project, warm_up_umap
from core.representations.senses import occurrence_embeddings, separation, separation_interval
from ui.cache import freeze_long_lived, in_model_turn, model_and_run, read_only, run_of
from ui.idle import wait_until_idle, wake_idle_waiters
from ui.store import cached

log = logging.getLogger(__name__)


# Senses page: every occurrence of a word at every layer (one pass over the sentences: the run), then 2-D projections
# per layer; the word and the layer are the views' parameters.


def cached_occurrences(model_name: str, word: str, sentences: tuple[str, ...], progress=None):
    """``core.representations.senses.occurrence_embeddings`` keyed by (model, word, sentences); ``progress(done, total)`` only when the model runs."""
    model, run = model_and_run(model_name, sentences)
    return cached("occurrences", run,
                  lambda: in_model_turn(occurrence_embeddings, model, list(sentences), word, progress=progress), (word,))


def cached_projection(model_name: str, word: str, sentences: tuple[str, ...], layer: int, method: str) -> np.ndarray:
    """``core.maths.projection.project`` of layer ``layer`` of ``cached_occurrences(...)``: read-only ``[N, 2]``, random state 0,
    so moving the layer slider never re-runs the model and a view is drawn the same way every time."""
    occurrences = cached_occurrences(model_name, word, sentences)
    return cached("projections", run_of(model_name, sentences),
                  lambda: read_only(project(occurrences.vectors[layer], method, random_state=0)), (word, layer, method))


def cached_fitted_projection(model_name: str, word: str, sentences: tuple[str, ...], layer: int, method: str):
    """``core.maths.projection.fit_projection`` of layer ``layer`` of ``cached_occurrences(...)`` (random state 0): a
    ``FittedProjection`` whose ``transform`` places a new occurrence into the same map. Keeps the fitted
    estimator, so fewer entries than ``cached_projection``."""
    occurrences = cached_occurrences(model_name, word, sentences)
    return cached("fitted-projections", run_of(model_name, sentences),
                  lambda: fit_projection(occurrences.vectors[layer], method, random_state=0), (word, layer, method))


def cached_separation(model_name: str, word: str, sentences: tuple[str, ...], labels: tuple[str, ...]):
    """``core.representations.senses.separation`` of ``cached_occurrences(...)``, one label per occurrence: a small table per layer.
    (In the store, so a re-saved model folder drops it with the model's other results.)"""
    return cached("separations", run_of(model_name, sentences),
                  lambda: separation(cached_occurrences(model_name, word, sentences).vectors, list(labels)), (word, labels))


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
    """``cached_projection`` of ``layer`` rotated, reflected, shifted and scaled (``core.maths.alignment.align_layout``)
    onto the same method's layout of the last hidden state, so every layer is drawn in one frame and
    moving the slider moves the same points instead of redrawing them."""
    last = cached_occurrences(model_name, word, sentences).num_layers
    reference = cached_projection(model_name, word, sentences, last, method)
    if layer == last:
        return reference
    return cached("aligned-projections", run_of(model_name, sentences),
                  lambda: read_only(align_layout(cached_projection(model_name, word, sentences, layer, method), reference)),
                  (word, layer, method))


def cached_separation_interval(model_name: str, word: str, sentences: tuple[str, ...], labels: tuple[str, ...]):
    """``core.representations.senses.separation_interval`` of ``cached_occurrences(...)`` (90% bootstrap), one label per occurrence."""
    return cached("separation-intervals", run_of(model_name, sentences),
                  lambda: separation_interval(cached_occurrences(model_name, word, sentences).vectors, list(labels)),
                  (word, labels))
