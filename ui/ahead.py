"""Work done ahead of a click, in a background thread, while the reader looks at what is on screen: each task is a
``ui.store.Result.later`` call, so a result computed here is the one the next run reads (a run asking for it while it
is being computed waits for it, never computes it twice)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import streamlit as st

LOG = logging.getLogger(__name__)


class Ahead:
    """One background worker: the newest list of tasks replaces those not started yet (the reader moved on)."""

    def __init__(self, name: str) -> None:
        self.name, self.lock, self.tasks, self.thread = name, threading.Lock(), [], None

    def submit(self, tasks: list[Callable[[], object]]) -> None:
        with self.lock:
            self.tasks = list(tasks)
            if self.thread is None and self.tasks:
                self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self.thread.start()

    def _run(self) -> None:
        while True:
            with self.lock:
                if not self.tasks:
                    self.thread = None
                    return
                task = self.tasks.pop(0)
            try:
                task()
            except Exception:  # computed ahead only: the run that needs it computes it and reports there
                LOG.warning("a result computed ahead failed", exc_info=True)

    def idle(self, timeout: float | None = None) -> bool:
        """Wait (up to ``timeout`` s) until every task submitted is done; whether it is (for tests)."""
        thread = self.thread
        if thread is not None:
            thread.join(timeout)
        return self.thread is None


def work_ahead(tasks: list[Callable[[], object]], *, key: str) -> Ahead:
    """Run ``tasks`` one after another in this session's background worker ``key``, replacing the tasks it has not
    started yet. A task that fails is logged and skipped: the run that needs its result computes it again and shows
    its error there."""
    worker = st.session_state.get(key)
    if not isinstance(worker, Ahead):
        worker = st.session_state[key] = Ahead(key)
    worker.submit(tasks)
    return worker
