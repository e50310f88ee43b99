"""UMAP's numba compilation (about 10 CPU-s holding the interpreter), started once per process after the bundled
model is loaded, and only once no page has run for ten seconds, or when a page is about to show UMAP."""

from __future__ import annotations

import logging
import threading
import time

import streamlit as st

from core.maths.projection import warm_up_umap
from ui.idle import wait_until_idle, wake_idle_waiters
from ui.models import freeze_long_lived

log = logging.getLogger(__name__)

_UMAP_WANTED = threading.Event()  # set by a page that shows UMAP: the warm-up stops waiting for an idle server


def start_umap_warmup(now: bool = False) -> threading.Thread:
    """Start compiling UMAP in a daemon thread, once per process; returns the ``threading.Thread``. ``ui.warmup``
    calls it after the bundled model is loaded.

    The thread first waits until no page has run for ten seconds (``ui.idle.wait_until_idle``), so the
    compilation never slows a page being drawn; ``now=True`` (a page about to show UMAP) ends that wait.
    (Not at a lower OS priority: the senses page waits for this thread, and a starved thread would make it wait longest.)
    """
    if now and not _UMAP_WANTED.is_set():
        _UMAP_WANTED.set()
        wake_idle_waiters()
    return umap_warmup_thread()


@st.cache_resource(show_spinner=False)
def umap_warmup_thread() -> threading.Thread:
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
