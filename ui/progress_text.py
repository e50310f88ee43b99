"""A ``progress(done, total)`` callback for a Streamlit progress bar, built from arguments only (a page's nested
function reading the bar from the page's globals would see the run that defined it)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial


def _move(bar, text: str, done: int, total: int) -> None:
    bar.progress(done / total if total else 1.0, text=text.format(done=done, total=total))


def bar_progress(bar, text: str) -> Callable[[int, int], None]:
    """``progress(done, total)`` that moves ``bar`` (``st.progress``'s element) to ``done / total`` and shows ``text``
    with ``{done}`` and ``{total}`` filled in."""
    return partial(_move, bar, text)


FLOW_PROGRESS = "Splitting the updates into their parts: layer {done} of {total}"  # ui.results.flows, layer by layer
