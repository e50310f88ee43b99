"""Page state and links: every page owns its options, and the URL shows exactly the view on screen.

A page declares each of its options with one call, a Streamlit widget wrapped by ``option``::

    layer = option(left.selectbox, "Layer (counted from 0)", range(layers), key="layer")
    words = option(st.toggle, "Word level", key="words")

The rules, for every page (and the sidebar's app-wide options, declared with ``app=True``):

- **Session keys are page-prefixed.** The attention page's layer lives under ``attention.layer``, the
  senses page's under ``senses.layer``: pages never read (or crash on) each other's values, whatever
  their types. The sidebar's ``model``, ``text``, ``present`` and ``img`` are shared by every page.
- **URL parameters are short**: the option's ``key`` (``?layer=4``). A value equal to its default is
  left out. Selection widgets write the option itself, not its label (``?query=6``, the token index).
- **The URL holds only the page on screen.** Each run writes the sidebar's parameters and the page's
  own; when the page has finished, every other parameter is removed, so no page's parameters leak
  into another page's URL. (Streamlit's ``bind="query-params"`` is not used: it names the parameter
  after the session key, so short parameters would mean shared keys, it writes a choice's label, and it
  would put a 100,000-character text into the URL.)
- **Option changes replace the URL; pages push it.** The server does not write ``st.query_params``
  (Streamlit adds a browser-history entry for every such write). At the end of a finished run (or of a
  fragment rerunning alone) the parameters go to the browser through ``ui.view_url``, which replaces the
  current history entry's URL (``history.replaceState``). Changing options adds no history entry, the URL
  still shows (and a reload reproduces) the view; moving to another page with the navigation adds one.
  So Back and Forward move between pages, and each page shows its options and texts as it was left
  (a back/forward is a link: see below). Tests read the URL the last run wrote with ``view_query``.
- **Coming back keeps the user's choices.** Moving between pages with the navigation, a page shows the
  options last chosen on it in this session (the browser drops the old page's parameters on the way).
- **A link or reload reproduces the view.** A new tab or a reload starts a session from the URL: options
  it names take its values, the others their defaults. A link followed inside the app (or back/forward)
  that names any of a page's options is the whole view of that page: options it does not name take
  their defaults, not what the session had. A link naming the sidebar's parameters sets them too.
- **Texts stay loadable.** A text goes into the URL as it is up to ``URL_TEXT_MAX_BYTES`` bytes once
  percent-encoded (about 2,000 ASCII or 220 CJK characters); a longer one is kept on the server in a
  bounded process-wide store under a short content id (``?text_id=3f9c…``). Such a link works while
  this server runs; the page says so.
- **What the browser falls back to is the value.** Each widget is drawn with the option's value as its default
  too (``starting_value_argument``): a tab that draws a widget after the run that set its value has passed (a
  slow first load, with a second run already under way) shows the value, not the page's default.
- An invalid value (a layer past a smaller model, an option that no longer exists, a garbled link) is
  clamped when it is a number in range form and otherwise falls back to the default.

``app.py`` wraps every run in ``page_run`` (which decides where values come from, removes foreign
parameters and writes the URL); pages call ``option`` per widget, ``set_option`` from callbacks and buttons, and
``link_url`` for links that open a view in a new tab. A page that ends early calls ``end_page()``,
not ``st.stop()``: after ``st.stop()`` Streamlit sends nothing more, so the URL could not be written.
"""

from __future__ import annotations

import hashlib
import inspect
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NoReturn
from urllib.parse import urlencode

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException

from ui.linked_texts import ID_SUFFIX, encoded_bytes, fits_in_url, linked_texts, text_id
from ui.option_values import DEFAULT_ARGUMENTS, MISSING, OptionSpec, option_spec, starting_value_argument, valid_value, value_from_url, value_to_url
from ui.view_url import VIEW_URL_KEY, write_view_url

HOME = "home"

# Parameters each page has declared in this process: decides whether a link names a page's options.
_PAGE_PARAMS: dict[str, set[str]] = {}
_APP_PARAMS: set[str] = set()


@dataclass
class _SessionPageState:
    """One per session, in ``st.session_state["page_state"]``."""

    page: str | None = None  # the page of the last finished run
    current: str | None = None  # the page of this run
    values: dict[str, Any] = field(default_factory=dict)  # last value of every option, by session key
    pending: dict[str, Any] = field(default_factory=dict)  # values set by ``set_option`` for the next run
    written: set[str] = field(default_factory=set)  # parameters written in this run
    query: dict[str, str] = field(default_factory=dict)  # the view's URL parameters, as the browser was last told
    run_query: dict[str, str] = field(default_factory=dict)  # the parameters of the page run under way
    url_writes: int = 0  # writes of the URL in this session (the browser applies only a newer one)
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:12])  # tells this session's writes from another's
    app_params: dict[str, str] = field(default_factory=dict)  # the sidebar's parameters, for links
    notices: list[str] = field(default_factory=list)
    running: bool = False  # inside ``page_run`` (a full run of a page, not a fragment's own rerun)


def _state() -> _SessionPageState:
    if "page_state" not in st.session_state:
        st.session_state["page_state"] = _SessionPageState()
    return st.session_state["page_state"]


def current_page() -> str:
    """The url path of the page this run shows (``HOME`` for the home page)."""
    return _page_name()


def _page_name() -> str:
    state = _state()
    if state.current is not None:
        return state.current
    ctx = get_script_run_ctx()
    if ctx is not None:
        page = ctx.pages_manager.get_pages().get(ctx.page_script_hash)
        if page and page.get("url_pathname"):
            return page["url_pathname"]
    return HOME


def session_key(key: str, *, app: bool = False, page: str | None = None) -> str:
    """The session-state key of option ``key``: ``"attention.layer"``, or ``key`` itself for app-wide options."""
    return key if app else f"{page or _page_name()}.{key}"


# --- one run -------------------------------------------------------------------------------------------


def _view_query() -> dict[str, str]:
    """The parameters being written: the page run's, or (a fragment rerunning alone) the view's own."""
    state = _state()
    return state.run_query if state.running else state.query


def view_query(session_state: Any = None) -> dict[str, str]:
    """The view's URL parameters as the last finished run (or fragment rerun) wrote them, in URL order.

    ``session_state``: ``AppTest.session_state`` in tests; the running session's by default."""
    states = st.session_state if session_state is None else session_state
    return dict(states["page_state"].query) if "page_state" in states else {}


def _write_url(key: str = VIEW_URL_KEY) -> None:
    state = _state()
    state.url_writes += 1
    write_view_url(urlencode(state.query), session=state.token, seq=state.url_writes, key=key)


def _forget(prefix_keys: list[str]) -> None:
    state = _state()
    for full in prefix_keys:
        state.values.pop(full, None)
    for wkey in list(st.session_state.keys()):
        base = str(wkey).split("~", 1)[0]
        if base in prefix_keys:
            del st.session_state[wkey]


@contextmanager
def page_run(page: str) -> Iterator[None]:
    """Wrap one full run of ``page`` (its url path, "" for home); ``app.py`` does this for every page.

    On entering a page from a link or back/forward, the URL decides the options it names (see the
    module docstring). When the page has finished (or ended with ``end_page``), every query parameter
    the run did not write is removed and the browser's URL is replaced with the result. After an error,
    a rerun or a stopped run the URL is left as it was.
    """
    state = _state()
    page = page or HOME
    ctx = get_script_run_ctx()
    history = bool(ctx is not None and getattr(ctx, "is_history_navigation", False))
    entered = state.page != page or history
    # the last run was this page's entry and did not finish (stopped: a widget changed, a probe reported): the same
    # entry, whose next run reads the URL for the options no run has read and keeps what the user changed since
    resumed = entered and not history and state.current == page
    state.current = page
    state.written = set()
    state.notices = []
    # What the URL holds now: the browser's own on entering a page; otherwise what this session last wrote (the
    # browser may send the query string the tab was opened with, however often the URL was replaced since).
    state.run_query = st.query_params.to_dict() if entered else dict(state.query)
    if entered and not resumed:
        in_url = set(state.run_query)  # the URL the browser sent: a link, a reload, back/forward
        names = {name.removesuffix(ID_SUFFIX) for name in in_url} | in_url
        if history or names & _APP_PARAMS:
            _forget([key for key in list(state.values) if "." not in key])
        if history or names & _PAGE_PARAMS.get(page, set()):
            _forget([key for key in list(state.values) if key.startswith(f"{page}.")])
    finished = False
    state.running = True
    try:
        yield
        finished = True
    except _PageEnd:
        finished = True  # end_page(): the run ends here, after the URL is tidied below
    except (RerunException, StopException):
        # st.rerun(), or Streamlit stopping this run for a newer one (fast reruns; pages call end_page, not st.stop):
        # the next run is still the entry (``resumed``), since the whole page has not read the URL yet. Counting the
        # stopped run as finished kept only the parameters it had reached (a link to the tour's step 6 in
        # presentation mode, its first run stopped by the column probe, showed step 1 outside presentation mode).
        raise
    finally:
        state.running = False
        if finished:
            state.page = page
            state.query = {name: value for name, value in state.run_query.items() if name in state.written}
            _write_url()


@contextmanager
def fragment_run(name: str) -> Iterator[None]:
    """Wrap a fragment's body (``ui.errors.friendly_fragment`` does): when the fragment reruns alone, the options it
    wrote go to the browser's URL at its end (from inside the fragment, the only place such a rerun can draw)."""
    if _state().running:
        yield  # part of a page run: page_run writes the URL
        return
    yield
    _write_url(f"{VIEW_URL_KEY}-{name}")


class _PageEnd(BaseException):
    """Raised by ``end_page``, caught by ``page_run`` (a BaseException, like Streamlit's own control flow,
    so that ``friendly_errors`` lets it through)."""


def end_page() -> NoReturn:
    """End this page's run here, as ``st.stop()`` does, but with the URL tidied like any finished run.

    After ``st.stop()`` Streamlit refuses every further message of the run, so ``page_run`` cannot
    remove the parameters the page did not write: a link's parameters of other pages would stay in
    the URL. Pages call this instead, at page level (outside ``page_run``, in a fragment's own rerun,
    it is ``st.stop()``).
    """
    if not _state().running:
        st.stop()
    raise _PageEnd


def _write_param(name: str, value: str | None, *, app: bool) -> None:
    state = _state()
    query = _view_query()
    if value is None:
        query.pop(name, None)
        if app:
            state.app_params.pop(name, None)
        return
    state.written.add(name)
    if app:
        state.app_params[name] = value
    query[name] = value  # a parameter already there keeps its place, as in the URL


# --- one option ----------------------------------------------------------------------------------------


def _url_value(spec: OptionSpec, param: str) -> Any:
    state = _state()
    query = _view_query()
    raw = query.get(param)
    if raw is not None:
        return value_from_url(spec, raw)
    if spec.kind == "text":
        content_id = query.get(param + ID_SUFFIX)
        if content_id:
            text = linked_texts().get(content_id)
            if text is None:
                state.notices.append(
                    "This link named a long text kept on the server that made the link; this server does not "
                    "have it (links to long texts work only while that server runs), so the default text is shown."
                )
                return MISSING
            return text
    return MISSING


def option(widget: Callable, *args, key: str, app: bool = False, **kwargs) -> Any:
    """Call ``widget(*args, **kwargs)`` as an option of the current page, its state kept by this module.

    ``widget`` is a Streamlit widget function or method (``st.toggle``, ``left.selectbox``, …): single
    choice (selectbox, radio, segmented_control, pills, select_slider), toggle or checkbox, slider or
    number_input, text_area or text_input. ``key`` is the URL parameter; the session key is
    ``"<page>.<key>"`` (``key`` itself with ``app=True``, for the sidebar). The widget's ``index``,
    ``value`` or ``default`` argument is its default value. Returns the widget's value.
    """
    name = getattr(widget, "__name__", "")
    arguments = inspect.signature(widget).bind_partial(*args, **kwargs).arguments
    spec = option_spec(name, arguments)
    for argument in DEFAULT_ARGUMENTS:
        arguments.pop(argument, None)
    state = _state()
    page = _page_name()
    full = session_key(key, app=app, page=page)
    (_APP_PARAMS if app else _PAGE_PARAMS.setdefault(page, set())).add(key)
    widget_key = full
    if spec.kind == "choice" and "format_func" in arguments:
        # Labels that change with the data (token labels of a new text) need a new widget, or the
        # browser would keep showing the old label; the value itself is kept below.
        widget_key += "~" + hashlib.md5("\x1f".join(spec.labels).encode()).hexdigest()[:8]

    live = st.session_state.get(widget_key, MISSING)
    if full in state.pending:
        value = state.pending.pop(full)
    elif live is not MISSING:
        value = live
    elif full in state.values:
        value = state.values[full]
    else:
        value = _url_value(spec, key)
    value = valid_value(spec, value)
    if live is MISSING or live != value:
        st.session_state[widget_key] = value
    result = widget(**arguments, **starting_value_argument(name, spec, value), key=widget_key)
    state.values[full] = result
    _write(spec, key, result, app=app, container=getattr(widget, "__self__", None))
    return result


def unshown_option(key: str, options: list | range, *, index: int = 0) -> Any:
    """A single-choice option of the current page that no Streamlit widget shows (a component draws the choice and
    reports it with ``set_option``): its value read as ``option`` reads it (a choice just made, this session's,
    the link's), one of ``options`` (default ``options[index]``), kept and written to the URL."""
    spec = option_spec("selectbox", {"options": options, "index": index})
    state, full = _state(), session_key(key)
    _PAGE_PARAMS.setdefault(_page_name(), set()).add(key)
    st.session_state.pop(full, None)  # a select box of this option drawn before: its stale value must not win later
    value = state.pending.pop(full) if full in state.pending else state.values.get(full, MISSING)
    value = valid_value(spec, _url_value(spec, key) if value is MISSING else value)
    state.values[full] = value
    _write(spec, key, value, app=False, container=None)
    return value


def _write(spec: OptionSpec, param: str, value: Any, *, app: bool, container) -> None:
    if spec.kind == "text":
        for notice in _state().notices:
            (container or st).warning(notice, icon=":material/link_off:")
        _state().notices.clear()
        if value == spec.default:
            _write_param(param, None, app=app)
            _write_param(param + ID_SUFFIX, None, app=app)
        elif fits_in_url(value):
            _write_param(param, value, app=app)
            _write_param(param + ID_SUFFIX, None, app=app)
        else:
            content_id = text_id(value)
            linked_texts().put(content_id, value)
            _write_param(param, None, app=app)
            _write_param(param + ID_SUFFIX, content_id, app=app)
            (container or st).caption(
                f"This text is too long for a link ({encoded_bytes(value):,} bytes in a URL), so the link holds a "
                "short id instead: it works while this server runs."
            )
        return
    _write_param(param, None if value == spec.default else value_to_url(spec, value), app=app)


def page_param(name: str, value: str | None = None) -> str | None:
    """A URL parameter of the current page that no widget shows (a room's code, a deck's pins): its value in the URL
    this run entered with (or as this session last wrote it), kept in the URL; ``value`` replaces it (written now).
    ``write_page_param(name, None)`` removes it."""
    _PAGE_PARAMS.setdefault(_page_name(), set()).add(name)
    current = _view_query().get(name) if value is None else value
    if current:
        _write_param(name, current, app=False)
    return current or None


def set_option(key: str, value: Any, *, app: bool = False, page: str | None = None) -> None:
    """Give option ``key`` of the current page (or of ``page``) the value ``value`` on the next run.

    For callbacks and buttons (``on_click=set_option, args=("stat", "previous")``); the page's next
    run shows it and writes it to the URL.
    """
    state = _state()
    state.pending[session_key(key, app=app, page=page or state.current or _page_name())] = value


def option_value(key: str, default: Any = None, *, app: bool = False, page: str | None = None) -> Any:
    """The last value of option ``key`` in this session (of the current page unless ``page``)."""
    return _state().values.get(session_key(key, app=app, page=page), default)


def link_url(page: str, **params: Any) -> str:
    """A relative link to ``page`` (its url path) showing the sidebar's model and text with ``params``.

    The link reproduces the view in a new tab: pass every option of the target page that matters
    (values as the URL holds them: the option, not its label).
    """
    query = dict(_state().app_params) | {name: str(value) for name, value in params.items() if value is not None}
    return f"{page}?{urlencode(query)}" if query else page


def write_page_param(key: str, value: str | None) -> None:
    """Write (or, with None, remove) the current page's URL parameter ``key`` for this run (``page_param`` reads it)."""
    _PAGE_PARAMS.setdefault(_page_name(), set()).add(key)
    _write_param(key, value, app=False)


def drawing_query() -> dict[str, str]:
    """The URL parameters of the view as far as this run has written them (a link opened: the link's own)."""
    return dict(_view_query())
