"""ui.stoppable: the progress bar with Stop, and a Stop remembered by the work's key, on a small page (AppTest)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.app


def _page_with_long_work():
    import streamlit as st

    from ui.stoppable import StopFlag, progress_with_stop

    flag = StopFlag("_work_stopped")
    text = st.text_input("Text", "first text", key="text")
    keep = st.session_state.get("keep_bar", False)
    key = ("work", text)
    if flag.stopped(key):
        flag.offer_to_go_on(f"You stopped the work on {text!r}.", "Go on", "work-go-on")
        st.stop()
    with progress_with_stop("Working…", "{done} of {total} steps", on_stop=flag.stop,
                            args=(key,), button_key="work-stop", clear=not keep) as progress:
        for done in range(1, 4):
            progress(done, 3)
    st.markdown(f"Done with {text!r}.")


def _said(at) -> str:
    return " ".join([m.value for m in at.markdown] + [i.value for i in at.info])


def test_the_bar_and_stop_go_when_the_work_is_done():
    at = AppTest.from_function(_page_with_long_work).run()
    assert not at.exception and "Done with 'first text'." in _said(at)
    assert not at.get("progress") and not at.button  # cleared
    at.session_state["keep_bar"] = True
    at.run()
    (bar,) = at.get("progress")
    assert bar.proto.text == "3 of 3 steps" and bar.proto.value == 100
    assert [b.label for b in at.button] == ["Stop"]


def test_a_stop_is_kept_for_its_key_and_the_text_survives_it():
    at = AppTest.from_function(_page_with_long_work)
    at.session_state["keep_bar"] = True  # the button stays drawn, so the test can click it
    at.run()
    at.text_input(key="text").set_value("second text").run()
    at.button(key="work-stop").click().run()
    assert not at.exception
    assert at.text_input(key="text").value == "second text"  # the text box keeps what was typed
    assert "You stopped the work on 'second text'." in _said(at) and "Done with" not in _said(at)
    assert at.session_state["_work_stopped"] == ("work", "second text")
    at.text_input(key="text").set_value("third text").run()  # other work is not held back by that Stop
    assert "Done with 'third text'." in _said(at)
    at.text_input(key="text").set_value("second text").run()  # back to the stopped work: still stopped
    assert "You stopped the work on 'second text'." in _said(at)
    at.button(key="work-go-on").click().run()
    assert "Done with 'second text'." in _said(at) and at.session_state["_work_stopped"] is None
