"""Is any page running? Background work (UMAP's compilation) waits until the server has been idle for a while, so
it never shares the interpreter with a page being drawn. Used by ``app.py``, ``ui.errors`` and ``ui.umap_warmup``."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

# Background work that needs no visitor (UMAP's compilation, about 10 CPU-s holding the interpreter) waits
# until no page has run for this long, so it never shares the interpreter with a page being drawn.
IDLE_SECONDS = 10.0
_activity = threading.Condition()
_pages_running = 0
_last_page_finished = time.monotonic()


@contextmanager
def page_running():
    """Around every page run (``app.py``) and every fragment's own rerun (``ui.errors.friendly_fragment``): while
    any runs, and for ``IDLE_SECONDS`` after, ``wait_until_idle`` waits."""
    global _pages_running, _last_page_finished
    with _activity:
        _pages_running += 1
    try:
        yield
    finally:
        with _activity:
            _pages_running -= 1
            _last_page_finished = time.monotonic()
            _activity.notify_all()


def wait_until_idle(wake: threading.Event | None = None, idle_seconds: float | None = None) -> None:
    """Return once no page is running and none has finished for ``idle_seconds`` (default ``IDLE_SECONDS``),
    or as soon as ``wake`` is set (a page that needs the work now; call ``wake_idle_waiters`` after setting it)."""
    quiet = IDLE_SECONDS if idle_seconds is None else idle_seconds
    with _activity:
        while not (wake is not None and wake.is_set()):
            idle_for = time.monotonic() - _last_page_finished
            if _pages_running == 0 and idle_for >= quiet:
                return
            _activity.wait(timeout=quiet - idle_for if _pages_running == 0 else None)


def wake_idle_waiters() -> None:
    """Let every ``wait_until_idle`` check its ``wake`` event again."""
    with _activity:
        _activity.notify_all()
