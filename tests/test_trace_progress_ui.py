"""``ui.trace_progress``: the trace's bar by layer and its Stop (AppTest on a tiny GPT-2), and a stop by one session
leaving another session waiting for the same trace neither waiting forever nor with an error (two threads on the
shared store)."""

from __future__ import annotations

import re
import threading
import time

import pytest
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.app

TEXT = "The cat sat on the mat. It was happy to be home, and the bass fish swims along the river bank."


def _page(folder: str, text: str):
    import streamlit as st

    from ui.trace_progress import trace_of

    trace = trace_of(folder, text)
    st.markdown(f"Read {len(trace.tokens('self'))} tokens in {trace.num_layers('self')} layers.")


def _bar_page(folder: str, text: str):
    """The bar as a pass leaves it after layer 1 of 2 (the page stops there, so the bar stays drawn)."""
    import streamlit as st

    from ui.models import run_of
    from ui.trace_progress import LayerBar

    bar = LayerBar(run_of(folder, text), eager=True)
    bar(0, 2)
    bar(1, 2)
    st.stop()


def test_the_bar_says_the_layer_and_offers_stop(tiny_gpt2_dir):
    at = AppTest.from_function(_bar_page, args=(tiny_gpt2_dir, TEXT), default_timeout=60).run()
    assert not at.exception
    (bar,) = at.get("progress")
    assert re.fullmatch(r"Reading the text: layer 1 of 2, (about \d+ s|under a second) left", bar.proto.text), bar.proto.text
    assert bar.proto.value == 50
    assert [b.label for b in at.button] == ["Stop"]


def test_the_pass_tells_the_bar_each_layer_and_the_bar_goes_when_done(tiny_gpt2_dir, monkeypatch):
    import ui.trace_progress as tp
    from ui.models import run_of

    monkeypatch.setattr(tp, "LONG_TOKENS", 0)  # the tiny model reads 64 tokens at most: every text is "long" here
    at = AppTest.from_function(_page, args=(tiny_gpt2_dir, TEXT + " once"), default_timeout=60).run()
    assert not at.exception
    assert at.markdown[0].value.startswith("Read ") and at.markdown[0].value.endswith(" tokens in 2 layers.")
    assert at.session_state[tp.REACHED] == (run_of(tiny_gpt2_dir, TEXT + " once"), 2, 2)  # told up to the last
    assert not at.get("progress") and not at.button  # cleared once the trace is there


def test_a_stopped_trace_says_where_keeps_nothing_and_computes_again_on_request(tiny_gpt2_dir):
    from ui import results
    from ui.models import run_of
    from ui.trace_progress import REACHED, STOPPED

    text = TEXT + " stopped"
    run = run_of(tiny_gpt2_dir, text)
    at = AppTest.from_function(_page, args=(tiny_gpt2_dir, text), default_timeout=60)
    at.session_state[STOPPED.name] = run  # what a click on Stop leaves, with how far the pass had told the bar
    at.session_state[REACHED] = (run, 1, 2)
    at.run()
    assert not at.exception
    assert [i.value for i in at.info] == [
        "Stopped at layer 1 of 2; nothing was kept. Press *Compute again* to read the text."]
    assert not at.markdown and results.traces.peek_at(run) is None
    next(b for b in at.button if b.label == "Compute again").click().run()
    assert not at.exception and not at.info
    assert at.markdown[0].value.endswith(" tokens in 2 layers.") and results.traces.peek_at(run) is not None


class Stopped(BaseException):
    """As Streamlit's rerun after a click on Stop, raised by the bar's update."""


def test_one_session_s_stop_leaves_another_waiting_session_its_trace(tiny_gpt2_dir):
    """Session A computes the trace and is stopped after its first layer while session B waits for the same trace:
    B is woken when A's pass ends, computes the trace itself and gets it, without A's stop."""
    from core.model.trace import Trace
    from ui import results
    from ui.models import run_of

    run = run_of(tiny_gpt2_dir, TEXT + " shared")
    inside, release = threading.Event(), threading.Event()
    seen: dict = {}

    def stop_after_first_layer(done, total):
        if done == 1:
            inside.set()
            release.wait(30)
            seen["a stopped"] = time.monotonic()
            raise Stopped

    def session_a():
        try:
            results.traces.at(run, progress=stop_after_first_layer)
        except Stopped:
            seen["a"] = "stopped"

    def session_b():
        seen["b asked"] = time.monotonic()
        try:
            seen["b"] = results.traces.at(run, progress=lambda done, total: seen.setdefault("b computes", time.monotonic()))
        except BaseException as err:  # noqa: BLE001 - the test reports whatever B got instead of its trace
            seen["b"] = err

    computed = results.traces.computed()
    a = threading.Thread(target=session_a)
    a.start()
    assert inside.wait(60)
    b = threading.Thread(target=session_b)
    b.start()
    time.sleep(0.5)  # B is asking while A's pass is in its first layer
    release.set()
    a.join(60)
    b.join(60)
    assert not a.is_alive() and not b.is_alive()
    assert seen["a"] == "stopped" and isinstance(seen["b"], Trace)
    assert seen["b asked"] < seen["a stopped"] < seen["b computes"]  # B waited for A, then computed it itself
    assert results.traces.computed() == computed + 1 and results.traces.peek_at(run) is seen["b"]
