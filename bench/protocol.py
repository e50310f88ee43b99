"""A Streamlit client without a browser: Streamlit's own websocket messages (BackMsg / ForwardMsg).

It opens ``/_stcore/stream`` as the frontend does, asks for a page run with a query string
(``BackMsg.rerun_script``), and records every ``ForwardMsg`` until the server has stayed idle.
So many sessions cost the client almost nothing, and a benchmark measures the server alone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlencode

# Settle time: a page view may take several script runs (a deep link reruns once through app.py).
QUIET_SECONDS = 1.5


@dataclass
class PageView:
    """What one session saw: seconds from connect to its last ``script_finished``, and what went wrong."""

    seconds: float = float("nan")
    script_runs: int = 0
    deltas: int = 0
    bytes_received: int = 0
    errors: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # markdown/alert bodies, to check what the page said
    figures: list[str] = field(default_factory=list)  # each Plotly chart's JSON spec, as the browser receives it
    response_headers: dict[str, str] = field(default_factory=dict)  # the websocket handshake's (e.g. nginx's X-Replica)


def run_apart(coroutine):
    """``asyncio.run`` on a thread of its own, so it also works where an event loop already runs on this thread
    (Playwright's sync API keeps one running in a pytest worker that has run a browser test)."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, coroutine).result()


def _rerun(query: dict[str, str], page: str, widget_states=None) -> bytes:
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ClientState_pb2 import ClientState

    state = ClientState(query_string=urlencode(query), page_name=page)
    if widget_states is not None:
        state.widget_states.CopyFrom(widget_states)
    return BackMsg(rerun_script=state).SerializeToString()


def _error_of(delta) -> str | None:
    """The text of an exception or error alert in a ``Delta``, if it is one."""
    if delta.WhichOneof("type") != "new_element":
        return None
    element = delta.new_element
    kind = element.WhichOneof("type")
    if kind == "exception":
        return f"exception: {element.exception.type}: {element.exception.message[:200]}"
    if kind == "alert" and element.alert.format == 1:  # Alert.ERROR
        return f"error alert: {element.alert.body[:200]}"
    return None


async def view_page(base_url: str, page: str, query: dict[str, str], *, timeout: float = 600.0,
                    headers: dict[str, str] | None = None, on_open: Callable[[], None] | None = None) -> PageView:
    """Open ``page`` (its url path, e.g. ``"attention"``) with ``query`` and wait until the server is idle.

    ``headers`` go with the websocket handshake (a browser's cookie, for a sticky load balancer); ``on_open`` is
    called once the websocket is open, before the page is asked for (a test that kills a server waits for it)."""
    import websockets
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    ws_url = base_url.replace("http://", "ws://") + "/_stcore/stream"
    view = PageView()
    started = time.perf_counter()
    last_finished = None
    running = False
    try:
        async with websockets.connect(ws_url, subprotocols=["streamlit"], max_size=None, open_timeout=timeout,
                                      additional_headers=headers) as ws:
            view.response_headers = {k.lower(): v for k, v in ws.response.headers.raw_items()}
            if on_open is not None:
                on_open()
            await ws.send(_rerun(query, page))
            deadline = started + timeout
            while True:
                wait = deadline - time.perf_counter()
                if last_finished is not None and not running:
                    wait = min(wait, QUIET_SECONDS)
                if wait <= 0:
                    view.errors.append("timeout")
                    break
                try:
                    raw = await asyncio.wait_for(ws.recv(), timeout=wait)
                except TimeoutError:
                    if last_finished is not None and not running:
                        break
                    view.errors.append("timeout")
                    break
                view.bytes_received += len(raw)
                msg = ForwardMsg()
                msg.ParseFromString(raw)
                kind = msg.WhichOneof("type")
                if kind == "new_session":
                    running = True
                elif kind == "session_status_changed":
                    running = msg.session_status_changed.script_is_running
                elif kind == "delta":
                    view.deltas += 1
                    error = _error_of(msg.delta)
                    if error:
                        view.errors.append(error)
                    if msg.delta.WhichOneof("type") == "new_element":
                        element = msg.delta.new_element
                        if element.WhichOneof("type") == "markdown":
                            view.texts.append(element.markdown.body)
                        elif element.WhichOneof("type") == "plotly_chart":
                            view.figures.append(element.plotly_chart.spec)
                elif kind == "script_finished":
                    view.script_runs += 1
                    last_finished = time.perf_counter()
                    if msg.script_finished == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                        view.errors.append("script compile error")
                elif kind == "page_not_found":
                    view.errors.append(f"page not found: {page}")
    except Exception as err:  # noqa: BLE001 - a refused or dropped connection is a result to report
        view.errors.append(f"{type(err).__name__}: {str(err)[:200]}")
    if last_finished is not None:
        view.seconds = last_finished - started
    return view


async def view_pages(base_url: str, page: str, queries: list[dict[str, str]], *, timeout: float = 600.0) -> list[PageView]:
    """Open every query at the same moment, one websocket session each."""
    return await asyncio.gather(*(view_page(base_url, page, q, timeout=timeout) for q in queries))


@dataclass
class Sent:
    """One protocol-level learner of a workshop room: seconds from pressing Send to the run that drew their map."""

    ok: bool = False
    seconds: float = float("nan")
    finished_at: float = float("nan")  # time.monotonic() of that run's end
    said: str = ""  # the success or error sentence the page answered with
    errors: list[str] = field(default_factory=list)


async def send_in_room(base_url: str, query: dict[str, str], sentence: str, *, timeout: float = 300.0,
                       headers: dict[str, str] | None = None) -> Sent:
    """Open ``/room`` with ``query`` (``room``: the code; ``me``: the learner), type ``sentence`` into "Your sentence"
    and press "Send" as the browser would (one rerun carrying both widgets' states: the text and the button's
    trigger), and wait for the run that answers (its success or error alert, then ``script_finished``)."""
    import websockets
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates

    sent = Sent()
    ids: dict[str, str] = {}
    ws_url = base_url.replace("http://", "ws://") + "/_stcore/stream"
    try:
        async with websockets.connect(ws_url, subprotocols=["streamlit"], max_size=None, open_timeout=timeout,
                                      additional_headers=headers) as ws:
            await ws.send(_rerun(query, "room"))
            pressed = None
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                msg = ForwardMsg()
                msg.ParseFromString(await asyncio.wait_for(ws.recv(), timeout=deadline - time.monotonic()))
                kind = msg.WhichOneof("type")
                if kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                    element = msg.delta.new_element
                    which = element.WhichOneof("type")
                    if which == "text_input" and element.text_input.label == "Your sentence":
                        ids["text"] = element.text_input.id
                    elif which == "button" and element.button.label == "Send":
                        ids["send"] = element.button.id
                    elif which == "alert" and pressed is not None and element.alert.format in (1, 4):  # error, success
                        sent.said = element.alert.body
                        sent.ok = element.alert.format == 4
                    error = _error_of(msg.delta)
                    if error and pressed is not None and not error.startswith("error alert"):
                        sent.errors.append(error)
                elif kind == "script_finished":
                    if pressed is None and {"text", "send"} <= ids.keys():
                        states = WidgetStates(widgets=[WidgetState(id=ids["text"], string_value=sentence),
                                                       WidgetState(id=ids["send"], trigger_value=True)])
                        await ws.send(_rerun(query, "room", states))
                        pressed = time.monotonic()
                    elif pressed is not None and sent.said:
                        sent.finished_at = time.monotonic()
                        sent.seconds = sent.finished_at - pressed
                        return sent
            sent.errors.append("timeout")
    except Exception as err:  # noqa: BLE001 - a refused or dropped connection is a result to report
        sent.errors.append(f"{type(err).__name__}: {str(err)[:200]}")
    return sent


async def watch_room(base_url: str, query: dict[str, str], until: Callable[[int], bool], *,
                     timeout: float = 600.0) -> list[tuple[float, int]]:
    """The presenter's projector (``/room`` with ``room`` and ``key``) left open: every ``(time.time(), entry
    count)`` its self-refreshing fragment shows (wall-clock time, as the room store stamps entries), until ``until(count)`` or ``timeout``."""
    import re

    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ClientState_pb2 import ClientState
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    seen: list[tuple[float, int]] = []
    ws_url = base_url.replace("http://", "ws://") + "/_stcore/stream"
    timers: list[asyncio.Task] = []

    async def tick(ws, fragment: str, every: float) -> None:  # what the browser's timer does for st.fragment(run_every)
        while True:
            await asyncio.sleep(every)
            state = ClientState(query_string=urlencode(query), page_name="room", fragment_id=fragment, is_auto_rerun=True)
            await ws.send(BackMsg(rerun_script=state).SerializeToString())

    async with websockets.connect(ws_url, subprotocols=["streamlit"], max_size=None) as ws:
        await ws.send(_rerun(query, "room"))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = ForwardMsg()
            try:
                msg.ParseFromString(await asyncio.wait_for(ws.recv(), timeout=deadline - time.monotonic()))
            except TimeoutError:
                break
            if msg.WhichOneof("type") == "auto_rerun" and not timers:
                timers.append(asyncio.create_task(tick(ws, msg.auto_rerun.fragment_id, msg.auto_rerun.interval)))
            if msg.WhichOneof("type") == "delta" and msg.delta.WhichOneof("type") == "new_element":
                element = msg.delta.new_element
                if element.WhichOneof("type") == "markdown":
                    found = re.match(r"\*\*(\d+) entries\*\*", element.markdown.body)
                    if found:
                        seen.append((time.time(), int(found[1])))
                        if until(int(found[1])):
                            break
        for timer in timers:
            timer.cancel()
    return seen
