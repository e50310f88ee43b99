"""The one place a page's trace is computed (issue 48, item 6): ``trace_of(model_name, text, max_tokens)`` returns the
kept ``core.model.trace.Trace`` of the text, or computes it with a progress bar by layer ("Reading the text: layer 12
of 30, about 20 s left", ``core.model.pass_progress``) and a Stop button.

When the bar is drawn: as the pass starts for a text of more than ``LONG_TOKENS`` tokens; for a shorter one only once
the estimate of the whole pass (from the layers done) passes ``SHOW_AFTER_SECONDS``, so a short text never makes a bar
flicker (it has the spinner) and a slow model on a shorter text still shows one.

Stop follows ``ui.stoppable``: the click asks Streamlit for a new run, the pass ends at the bar's next update (a
Streamlit call, after the next layer: ``record``'s hooks are removed and nothing is kept, ``ui.bounded_cache`` keeps
no value of a computation that raised), the text and settings stay (they are widgets), and the page says where the
pass was stopped and offers to compute it again (``StopFlag`` by the run, so another text or model is not held back).
The trace in the store is shared by sessions: a session waiting for the same text while another computes it is woken
when that one ends; when it was stopped, the waiting session computes the trace itself (with its own bar), never
waiting forever nor reading the other's stop as an error (``tests/test_trace_progress_ui.py``). A waiting session's
bar stays at "Waiting for the model…" until it computes.
"""

from __future__ import annotations

import time

import streamlit as st

from core.model.pass_progress import layer_progress
from core.model.recording import is_recordable
from core.model.run import Run
from core.model.text_limits import token_limit
from core.model.trace import Trace
from ui import results
from ui.models import loaded_model, run_of
from ui.page_state import end_page
from ui.stoppable import StopFlag

LONG_TOKENS = 512  # above this many tokens the bar and Stop are drawn as the pass starts
SHOW_AFTER_SECONDS = 2.0  # below it, they are drawn once the whole pass is estimated to take longer than this
STOPPED = StopFlag("_trace_stopped")  # the run whose trace the reader stopped
REACHED = "_trace_reached"  # session key: (run, layers done, layers in all) as the pass last told the bar
WAITING = "Waiting for the model…"


def stopped_sentence(done: int, total: int | None) -> str:
    where = f"layer {done} of {total}" if total else "the start"
    return f"Stopped at {where}; nothing was kept. Press *Compute again* to read the text."


class LayerBar:
    """The pass's ``progress(done, total)`` in one page run: keeps how far it got in the session, and draws the bar
    and Stop in ``slot`` (at once when ``eager``, else once the pass is estimated to take over ``SHOW_AFTER_SECONDS``)
    and moves the bar; its Streamlit call is where a click on Stop ends the pass."""

    def __init__(self, run: Run, eager: bool):
        self.run, self.slot, self.bar, self.start = run, st.empty(), None, time.monotonic()
        if eager:
            self.draw()

    def draw(self) -> None:
        with self.slot.container():
            self.bar = st.progress(0.0, text=WAITING)
            st.button("Stop", key=f"trace-stop-{self.run.digest}", on_click=STOPPED.stop, args=(self.run,),
                      icon=":material/stop:", help="Stop reading the text; your text and settings stay")

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done == 0:  # the pass starts now (after any wait for the model or another session's pass)
            self.start = now
        elapsed = now - self.start
        st.session_state[REACHED] = (self.run, done, total)
        if self.bar is None and done and elapsed / done * total > SHOW_AFTER_SECONDS:
            self.draw()
        if self.bar is not None:
            self.bar.progress(done / total if total else 1.0,
                              text=f"Reading the text: {layer_progress(done, total, elapsed)}")


def _tokens(run: Run) -> int:
    """Tokens the pass reads (every text of the run, cut to its limit)."""
    model = loaded_model(run.model)
    limit = token_limit(model, run.max_tokens)
    return sum(len(model.tokenizer(t, truncation=True, max_length=limit)["input_ids"]) for t in run.texts)


def trace_at(run: Run) -> Trace:
    """``results.traces.at(run)``, computed with the bar and Stop; a stopped run's page says so and ends there."""
    kept = results.traces.peek_at(run)
    if kept is not None:
        return kept
    if STOPPED.stopped(run):
        reached = st.session_state.get(REACHED)
        done, total = reached[1:] if reached and reached[0] == run else (0, None)
        STOPPED.offer_to_go_on(stopped_sentence(done, total), "Compute again", f"trace-go-on-{run.digest}")
        end_page()
    eager = _tokens(run) > LONG_TOKENS
    bar = LayerBar(run, eager)
    if eager:
        trace = results.traces.at(run, progress=bar)
    else:
        with st.spinner("Running the model…"):
            trace = results.traces.at(run, progress=bar)
    bar.slot.empty()
    return trace


def trace_of(model_name: str, texts: str | tuple[str, ...], max_tokens: int | None = None) -> Trace | None:
    """The trace of ``texts`` (one text, or an encoder-decoder's ``(source, target)``) read by ``model_name``; None
    for a model the app does not record (``is_recordable``: loaded with its own attention, e.g. GPT-Neo), whose pages
    read what its analysis gives and say what they cannot show."""
    if not is_recordable(loaded_model(model_name).model):
        return None
    return trace_at(run_of(model_name, texts, max_tokens, None))
