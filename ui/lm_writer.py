"""Generation that the reader can stop (issue 27, item 2): the text is written a short chunk at a time, so a Stop
button can end it between chunks and the tokens written so far stay on screen.

A Streamlit click inside a fragment waits for the run in progress to finish; a generation written in one run could
not be stopped. So the first chunk is written in the run that asks for the text (a tiny model or a short text is
done there: at least ``MIN_CHUNK`` tokens), and the rest by a fragment that reruns itself every ``POLL_SECONDS``
while tokens remain, writing for up to ``CHUNK_SECONDS`` each time and showing the text so far, the progress and
Stop. Stop keeps what was written (in the session, by the generation's arguments); Continue writes on from there, to
the same text an uninterrupted generation gives (``core.outputs.generation.generate(resume=...)``). A finished text goes to
the same process-wide store as every other language-model result, then the page is drawn again around it.
"""

from __future__ import annotations

import time

import streamlit as st

from core.model.run import Run
from core.outputs.generation import Generation, generate
from ui import results
from ui.errors import friendly_fragment
from ui.models import language_model_of, model_turn, run_of
from ui.stoppable import Progress, progress_with_stop

CHUNK_SECONDS = 0.3  # one run writes at least MIN_CHUNK tokens, then stops after this long
MIN_CHUNK = 5  # so a short generation always ends in the run that asks for it, however busy the machine
POLL_SECONDS = 0.1
KEPT = 8  # unfinished or stopped generations kept per session
TOKENS_WRITTEN = "Token {done} of {total}"  # what the progress bar says while a generation is written
GenerationKey = tuple[Run, tuple]  # (run of the model, text and token limit; the generate options as sorted pairs)


def generation_key(model_name: str, text: str, options: dict) -> GenerationKey:
    """The key of ``ui.results.generations`` for ``text`` written by ``model_name`` with the ``generate`` keyword
    arguments ``options`` (``max_tokens`` among them: it goes in the run)."""
    options = dict(options)
    run = run_of(model_name, text, options.pop("max_tokens", None))
    return run, tuple(sorted(options.items()))


def finished(key: GenerationKey) -> Generation | None:
    """The finished generation kept under ``key``, or None."""
    return results.generations.peek_at(key[0], *key[1])


def _session(name: str) -> dict:
    if name not in st.session_state:
        st.session_state[name] = {}
    return st.session_state[name]


def _keep(name: str, key, value) -> None:
    kept = _session(name)
    kept.pop(key, None)
    kept[key] = value
    while len(kept) > KEPT:
        kept.pop(next(iter(kept)))


def stopped(key) -> Generation | None:
    """The generation the reader stopped, with the tokens written until then."""
    return _session("lm-stopped").get(key)


def stop(key) -> None:
    """Stop's callback: keep the tokens written so far as a stopped generation."""
    partial = _session("lm-writing").get(key)
    if partial is not None:
        _keep("lm-stopped", key, Generation(partial.prompt, partial.steps, True, False))


def resume(key) -> None:
    """Continue's callback: write on from the stopped tokens."""
    _session("lm-stopped").pop(key, None)


def write_chunk(key: GenerationKey, progress: Progress) -> Generation | None:
    """Write on for up to ``CHUNK_SECONDS`` (at least ``MIN_CHUNK`` tokens), telling ``progress`` (done, total); the
    finished generation (also kept in ``ui.results.generations`` under ``key``), or None while tokens remain."""
    run, options = key
    kwargs = dict(options)
    lm = language_model_of(run.model)
    partial = _session("lm-writing").get(key)
    written = list(partial.steps) if partial is not None else []
    total = max(int(kwargs["steps"]), len(kwargs.get("branch", ())))
    deadline = time.monotonic() + CHUNK_SECONDS
    count = [len(written)]

    def counted(done: int, total: int) -> None:
        count[0] = done
        progress(done, total)

    with model_turn():
        g = generate(lm, run.text, **kwargs, max_tokens=run.max_tokens, resume=written, progress=counted,
                     should_stop=lambda: count[0] >= len(written) + MIN_CHUNK and time.monotonic() > deadline)
    if g.stopped and len(g.steps) < total:
        _keep("lm-writing", key, g)
        return None
    g = Generation(g.prompt, g.steps, False, g.ended)
    _session("lm-writing").pop(key, None)
    results.generations.keep_at(run, options, g)
    return g


def _writing(key: GenerationKey) -> None:
    """One chunk, the text so far, and Stop; once finished or stopped, the page is drawn again around the text."""
    if stopped(key) is not None or finished(key) is not None:
        st.rerun(scope="app")
    # the bar and Stop stay drawn between chunks (cleared, they would blink out at every rerun), above the text so far
    with progress_with_stop("Writing…", TOKENS_WRITTEN, on_stop=stop, args=(key,), button_key="generation-stop",
                            help="Stop writing; the tokens written so far stay", clear=False) as progress:
        if write_chunk(key, progress) is not None:
            st.rerun(scope="app")
    partial = _session("lm-writing")[key]
    st.code(partial.text, language=None, wrap_lines=True)


def keep_writing(key: GenerationKey) -> None:
    """The fragment that writes the rest, a chunk per rerun (``POLL_SECONDS`` apart), with Stop."""
    friendly_fragment(_writing, run_every=POLL_SECONDS)(key)
