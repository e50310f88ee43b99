"""Start-up work done before the first visitor asks: import the heavy libraries and load the bundled model, convert
the bundled language model into its cache if it is not there yet, then (only after that, and only once no page has
run for ten seconds) let numba compile UMAP for the senses page."""

from __future__ import annotations

import gc
import logging
import threading
import time

from core.model.bundled_lm import BundledLMError, cache_ready, cached_folder

log = logging.getLogger(__name__)

_started = threading.Event()
_lock = threading.Lock()
# Held while the warm-up imports torch and transformers: transformers resolves its names lazily, and two
# threads importing it at once can see a half-initialised module. A page run waits here instead.
_importing = threading.Lock()
# Set while the warm-up converts the bundled language model (the sidebar says so instead of quoting the wait).
converting_language_model = threading.Event()


def prepare_language_model() -> float | None:
    """Convert the bundled language model into its cache when it is missing or unsound, as its first load would, so
    that choosing it later does not wait. Returns the seconds it took, or None when there was nothing to do or it
    could not be done (the first load then explains why)."""
    from core.model.models import WEIGHT_LOAD_LOCK  # noqa: PLC0415 - torch: ui.warmup must import fast (before the start-up wait)

    if cache_ready():
        return None
    started = time.perf_counter()
    converting_language_model.set()
    try:
        with WEIGHT_LOAD_LOCK:  # a visitor choosing the model meanwhile waits for this conversion, never a second one
            cached_folder()
    except BundledLMError as err:
        log.warning("the bundled language model was not prepared: %s", err)
        return None
    finally:
        converting_language_model.clear()
    seconds = time.perf_counter() - started
    log.info("bundled language model converted into its cache in %.1f s", seconds)
    return seconds


def _warm_up(collector_was_on: bool) -> None:
    started = time.perf_counter()
    try:
        try:
            from core.model.models import DEFAULT_MODEL  # noqa: PLC0415 - the warm-up thread imports torch, not the start-up
            from ui.models import loaded_model  # noqa: PLC0415 - the warm-up thread imports torch, not the start-up
            from ui.umap_warmup import start_umap_warmup  # noqa: PLC0415 - the warm-up thread imports torch, not the start-up
        finally:
            _importing.release()
        try:
            import transformers.modeling_utils  # noqa: F401, PLC0415 - what loading any model imports, in this thread
            loaded_model(DEFAULT_MODEL)
            log.info("ready: bundled model loaded %.1f s after start-up began", time.perf_counter() - started)
        except Exception:  # the first page will load it and explain any failure
            log.exception("could not load the bundled model at start-up")
    finally:
        # Loading the model froze what it left alive (ui.models.freeze_long_lived); collect as before from here.
        if collector_was_on:
            gc.enable()
    try:
        prepare_language_model()
    except Exception:  # choosing the model converts it and explains any failure
        log.exception("could not prepare the bundled language model at start-up")
    start_umap_warmup()  # after the model, not before; it then waits until no page has run for ten seconds

def start_warmup() -> threading.Thread | None:
    """Once per process: load the bundled model in a background thread, then start UMAP's warm-up. The cyclic
    garbage collector is off until the model is loaded.

    Returns the thread, or None when it was already started. Call ``wait_for_imports`` before
    importing the app's own modules in the same process.
    """
    with _lock:
        if _started.is_set():
            return None
        _started.set()
        _importing.acquire()
    # Importing torch and transformers and loading the model allocate about a million long-lived objects and no
    # garbage worth collecting; the cyclic collector's full passes over that growing heap were ~0.9 of the
    # ~5.7 CPU-s this takes (measured). It is switched back on (if it was on) when the warm-up ends.
    collector_was_on = gc.isenabled()
    gc.disable()
    thread = threading.Thread(target=_warm_up, args=(collector_was_on,), name="startup-warmup", daemon=True)
    thread.start()
    return thread

def wait_for_imports(timeout: float | None = None) -> bool:
    """Block until the warm-up thread has imported torch and transformers (at once if it has or never started),
    or for at most ``timeout`` seconds. Returns whether they are imported."""
    if not _importing.acquire(timeout=-1 if timeout is None else timeout):
        return False
    _importing.release()
    return True
