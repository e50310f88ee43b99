"""Failures become a sentence on the page, never a traceback."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import streamlit as st

from core.errors import UserFacingError
from ui.idle import page_running
from ui.page_state import fragment_run

log = logging.getLogger(__name__)



def user_message(err: Exception) -> str:
    """The sentence shown for ``err``."""
    if isinstance(err, UserFacingError):
        return str(err)
    if isinstance(err, MemoryError):
        return "The computation needed more memory than this machine has. Try a shorter text or a smaller corpus."
    return (
        f"Something went wrong ({type(err).__name__}). Your text and settings are kept: "
        "change the input or the options and try again. If it keeps happening, the server log has the details."
    )


@contextmanager
def friendly_errors(what: str = "") -> Iterator[None]:
    """Run a block; any exception is logged and shown as ``st.error`` with a plain sentence.

    Streamlit's own control flow (``st.stop``, reruns) derives from BaseException and passes through.
    """
    try:
        yield
    except Exception as err:  # the point is to catch everything a page can raise
        if not isinstance(err, UserFacingError):
            log.exception("unexpected error%s", f" while {what}" if what else "")
        st.error(user_message(err), icon=":material/error:")


def friendly_fragment(func: Callable, *, run_every: float | None = None) -> Callable:
    """``st.fragment`` (rerunning itself every ``run_every`` seconds when given) whose failures are a sentence too.

    A fragment that reruns on its own runs outside the page's ``friendly_errors`` block, and
    Streamlit would draw its exception as a traceback; this puts the boundary inside it. It also runs
    outside ``app.py``'s ``page_running``, so it counts itself: a learner clicking through heads keeps
    background work (UMAP's compilation) waiting, as a page run does. Rerunning alone, it writes the options it
    changed to the browser's URL (``ui.page_state.fragment_run``).
    """

    @functools.wraps(func)
    def body(*args, **kwargs):
        with page_running(), friendly_errors(f"running {func.__name__}"), fragment_run(func.__name__):
            return func(*args, **kwargs)

    return st.fragment(body, run_every=run_every)
