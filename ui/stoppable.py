"""Long work shown with a progress bar and a Stop button (``progress_with_stop``), and a Stop remembered in the session
by the work's key (``StopFlag``), so that the page can say the work was stopped and offer to go on.

A click on Stop asks Streamlit for a new run: the run doing the work ends at its next Streamlit call (the bar's next
update), the button's callback runs first in the new run, and the widgets keep their values, so the page is drawn again
with the same text and settings, and without the work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import streamlit as st

from ui.progress_text import bar_progress

Progress = Callable[[int, int], None]  # (done, total), the work's progress callback


@dataclass(frozen=True)
class StopFlag:
    """A Stop kept in ``st.session_state[name]``: the key of the work stopped last (the key says which model, text and
    settings it was for, so other work is not held back)."""

    name: str

    def stopped(self, key) -> bool:
        return st.session_state.get(self.name) == key

    def stop(self, key) -> None:
        """The Stop button's callback."""
        st.session_state[self.name] = key

    def clear(self) -> None:
        """The go-on button's callback."""
        st.session_state[self.name] = None

    def offer_to_go_on(self, said: str, label: str, button_key: str) -> None:
        """Say ``said`` (the work was stopped, and what the page shows) and offer a button that clears the Stop."""
        st.info(said, icon=":material/stop_circle:")
        st.button(label, key=button_key, on_click=self.clear, icon=":material/play_arrow:")


@contextmanager
def progress_with_stop(text: str, report: str, *, on_stop: Callable | None = None, args: tuple = (),
                       button_key: str | None = None, help: str | None = None, clear: bool = True) -> Iterator[Progress]:
    """A progress bar reading ``text``, with a Stop button below it when ``on_stop`` is given (``on_stop(*args)`` on a
    click); yields the progress callback (``ui.progress_text.bar_progress``), which fills the bar and writes ``report``
    on it with ``{done}`` and ``{total}`` filled in. With ``clear`` both go when the work is done; without, they stay
    (a fragment that redraws them while it works)."""
    slot = st.empty()
    with slot.container():
        bar = st.progress(0.0, text=text)
        if on_stop is not None:
            st.button("Stop", key=button_key, on_click=on_stop, args=args, icon=":material/stop:", help=help)
    yield bar_progress(bar, report)
    if clear:
        slot.empty()
