"""Start-up work done before the first visitor asks: import the heavy libraries and load the bundled model,
then (only after that) let numba compile UMAP for the senses page."""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger("explorer")


_started = threading.Event()
_lock = threading.Lock()
# Held while the warm-up imports torch and transformers: transformers resolves its names lazily, and two
# threads importing it at once can see a half-initialised module. A page run waits here instead.
_importing = threading.Lock()


def _warm_up() -> None:
    started = time.perf_counter()
    try:
        from core.models import DEFAULT_MODEL
        from ui.cache import cached_model, start_umap_warmup
    finally:
        _importing.release()
    try:
        cached_model(DEFAULT_MODEL)
        log.info("ready: bundled model loaded %.1f s after start-up began", time.perf_counter() - started)
    except Exception:  # noqa: BLE001 - the first page will load it and explain any failure
        log.exception("could not load the bundled model at start-up")
    start_umap_warmup()  # after the model, not before: it overlaps the first page's own work, never its model load


def start_warmup() -> threading.Thread | None:
    """Once per process: load the bundled model in a background thread, then start UMAP's warm-up.

    Returns the thread, or None when it was already started. Call ``wait_for_imports`` before
    importing the app's own modules in the same process.
    """
    with _lock:
        if _started.is_set():
            return None
        _started.set()
        _importing.acquire()
    thread = threading.Thread(target=_warm_up, name="startup-warmup", daemon=True)
    thread.start()
    return thread


def wait_for_imports() -> None:
    """Block until the warm-up thread has imported torch and transformers (at once if it has or never started)."""
    with _importing:
        pass
