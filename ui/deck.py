"""The slide deck: figures pinned from any page (the "Pin to deck" button ``show_figure`` draws under every figure),
kept in the session and in the Deck page's link, and made into slides for ``viz.deck_pptx`` and ``viz.deck_html``.

A pin is the view's link (its page and URL parameters, which reproduce it), the figure's name, its title, the sentence
written from its numbers (``show_figure``'s ``alt``), the model and the text. The figure itself, with its numbers as
CSV, is kept twice: in this process, in the declared result ``ui.results.pinned_figures`` (keyed by the model's run and
the pin's page, query and name), and in the pinned figures' store (``core.workshop.pinned``: a SQLite file beside the
workshop rooms' or the rooms' Redis, as JSON text), which every replica and a restarted server read. How a pin becomes
a figure again:

1. the kept figure, when this process has it (pinned here, and not pushed out of its shelf);
2. else the stored figure (pinned on any replica, before a restart; not refused as too big, not pushed out of the
   store's total), put back on this process's shelf;
3. otherwise it is drawn again from its link by ``ui.view_figures.redraw`` (the page's own figure-building code in
   ``ui.page_figures``, on the view's cached results ``ui.results``), and kept with ``keep_drawn``;
4. when the link cannot draw it (a page not in ``ui.view_figures.REDRAWS``, or a view that needs what a link does not
   carry), the Deck page names the pin "wanted" (``WANTED``, process-wide) and offers its link; when any session draws
   that view (same page, same URL parameters) ``show_figure`` keeps the figure it drew on the shelf.

The Deck page's link holds the pins (``?pins=``: their page, query, name, title, sentence, model and text as JSON,
zlib-compressed, base64url), so a reload or a shared link gives the same deck.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from urllib.parse import parse_qsl, urlencode, urljoin

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from streamlit.errors import StreamlitDuplicateElementKey

from core.workshop.pinned import STORE_ERRORS, TOO_BIG, PinLimits, PinnedStore, open_pinned_store, pin_limits
from core.workshop.settings import RoomSettings
from ui import results
from ui.models import run_of
from ui.page_state import current_page, drawing_query, view_query
from ui.session import current_model_name, current_room_settings, current_settings, current_text
from viz.deck import Slide, figure_from_json, plain_text

SESSION_KEY = "deck.pins"
LINK_VERSION = "1."
MAX_LINK_CHARS = 60_000  # a longer ?pins= is refused (far past any deck a link carries: 30 pins are about 3,000)
TEXT_IN_PIN = 500  # characters of the text a pin keeps for its notes (the link holds the whole text)
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pin:
    """One pinned figure (see the module docstring)."""

    page: str  # url path ("" for home)
    query: str  # the view's URL parameters, URL-encoded
    name: str  # the figure's name (its file name)
    title: str
    sentence: str
    model: str
    text: str

    @property
    def link(self) -> str:
        """The view's relative link (reproduces it)."""
        return f"./{self.page}" + (f"?{self.query}" if self.query else "")

    @property
    def view(self) -> tuple[str, str, str]:
        """What the view's figure is kept under: page, URL parameters in a fixed order, figure name."""
        return self.page, canonical(self.query), self.name

    @property
    def stored_as(self) -> tuple[str, str]:
        """What the figure is stored under in the pinned figures' store: the model and the view's canonical link."""
        page, query, name = self.view
        return self.model, f"./{page}" + (f"?{query}" if query else "") + f"#{name}"


@dataclass(frozen=True)
class PinnedFigure:
    """A pinned figure as kept on the server: the view's figure (unfitted, shared: never modified) and its CSV."""

    figure: go.Figure
    table: str
    sentence: str
    size: int


def canonical(query: str | dict) -> str:
    """URL parameters in one order (a link and the view drawn from it write them in different orders)."""
    items = query.items() if isinstance(query, dict) else parse_qsl(query, keep_blank_values=True)
    return urlencode(sorted((str(k), str(v)) for k, v in items))


# --- the session's pins and the link ---------------------------------------------------------------------------------

def pins() -> list[Pin]:
    """This session's pins, in slide order."""
    return list(st.session_state.get(SESSION_KEY, []))


def set_pins(new: list[Pin]) -> None:
    st.session_state[SESSION_KEY] = list(new)


def encode_pins(chosen: list[Pin]) -> str:
    """The pins as one URL parameter value (JSON, zlib, base64url), "" for none."""
    if not chosen:
        return ""
    rows = [[p.page, p.query, p.name, p.title, p.sentence, p.model, p.text] for p in chosen]
    packed = zlib.compress(json.dumps(rows, ensure_ascii=False, separators=(",", ":")).encode("utf-8"), 9)
    return LINK_VERSION + base64.urlsafe_b64encode(packed).decode("ascii").rstrip("=")


class BadDeckLink(ValueError):
    """A ``?pins=`` value that is not a deck this app wrote; the message is a sentence."""


def decode_pins(value: str) -> list[Pin]:
    """The pins of ``encode_pins``'s ``value``; raises ``BadDeckLink`` for anything else."""
    if not value:
        return []
    if len(value) > MAX_LINK_CHARS or not value.startswith(LINK_VERSION):
        raise BadDeckLink("This link's deck is not one this app wrote (or it was cut), so the deck is empty.")
    body = value[len(LINK_VERSION):]
    try:
        rows = json.loads(zlib.decompress(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)), bufsize=MAX_LINK_CHARS))
        found = [Pin(*(str(field) for field in row)) for row in rows]
    except (binascii.Error, zlib.error, ValueError, TypeError) as err:
        raise BadDeckLink("This link's deck could not be read (it was cut or changed), so the deck is empty.") from err
    return found


# --- pinning ---------------------------------------------------------------------------------------------------------

WANTED: set[tuple[str, str, str]] = set()  # views whose pinned figure this server has lost: kept when drawn again
_WANTED_LOCK = threading.Lock()


def _kept_run(model: str):
    return run_of(model)


@st.cache_resource(show_spinner=False)
def pinned_store_for(settings: RoomSettings, limits: PinLimits) -> PinnedStore:
    """One pinned figures' store per process and settings (beside the workshop rooms: ``core.workshop.pinned``)."""
    return open_pinned_store(settings, limits)


def pinned_store() -> PinnedStore | None:
    """The pinned figures' store, or None when its settings are wrong or it cannot be opened (the shelf still works)."""
    try:
        return pinned_store_for(current_room_settings(), pin_limits())
    except STORE_ERRORS as err:
        log.warning("the pinned figures' store cannot be opened: %s", err)
        return None


def keep_figure(pin: Pin, fig: go.Figure, table: str, sentence: str) -> str | None:
    """Keep ``fig`` (and its CSV ``table``) on the pinned figures' shelf and in their store, under ``pin``'s view;
    a sentence when the store did not take it (too big, or not reachable), else None."""
    figure_json = fig.to_json()
    results.pinned_figures.keep_at(_kept_run(pin.model), pin.view,
                                   PinnedFigure(fig, table, sentence, len(table) + len(figure_json)))
    kept = pinned_store()
    try:
        answer = None if kept is None else kept.put(pin.stored_as, figure_json, table, sentence)
    except STORE_ERRORS as err:
        log.warning("a pinned figure was not stored: %s", err)
        answer = None
    if answer == TOO_BIG:
        return (f"This figure takes more than the {kept.limits.figure_bytes / 1e6:g} MB one pinned figure may take "
                "(the setting EXPLORER_PIN_FIGURE_MB), so only this server keeps it: a shared link or another server "
                "draws it again from its link, or asks to open the view.")
    if answer is None:
        return ("The pinned figures' store could not be reached, so only this server keeps this figure: a shared "
                "link or another server draws it again from its link, or asks to open the view.")
    return None


def keep_drawn(pin: Pin, fig: go.Figure, data, sentence: str) -> None:
    """Keep ``fig`` drawn again from ``pin``'s link (``ui.view_figures``), with its table (or a function building it)."""
    keep_figure(pin, fig, _table(data), sentence)


def kept_figure(pin: Pin) -> PinnedFigure | None:
    """``pin``'s figure as this process keeps it, else as the store keeps it, or None (then its view is drawn again:
    the module docstring)."""
    kept = results.pinned_figures.peek_at(_kept_run(pin.model), *pin.view)
    if kept is not None:
        return kept
    found = pinned_store()
    try:
        stored = None if found is None else found.get(pin.stored_as)
        figure = None if stored is None else figure_from_json(stored.figure_json)
    except (*STORE_ERRORS, ValueError) as err:
        log.warning("a stored pinned figure could not be read: %s", err)
        return None
    if stored is None:
        return None
    kept = PinnedFigure(figure, stored.table_csv, stored.sentence, len(stored.table_csv) + len(stored.figure_json))
    results.pinned_figures.keep_at(_kept_run(pin.model), pin.view, kept)
    return kept


def want(missing: list[Pin]) -> None:
    """Name ``missing`` pins' views so that drawing them again keeps their figures."""
    with _WANTED_LOCK:
        WANTED.update(pin.view for pin in missing)


def slide_limit() -> int:
    return current_settings().max_deck_slides


def limit_sentence(limit: int) -> str:
    where = "this workshop server's" if current_settings().server_mode else "this app's"
    return (f"A deck holds at most {limit} slide{'s' if limit != 1 else ''} ({where} limit, the setting EXPLORER_MAX_DECK_SLIDES), so that "
            "drawing it stays quick: remove a pin to make room.")


def _table(data) -> str:
    if data is None:
        return ""
    table = data() if callable(data) else data
    return table.to_csv(index=False) if isinstance(table, pd.DataFrame) else ""


PIN_TOAST = "deck.pin_toast"  # session key: the sentence the last Pin click left for the next run to show


def pin_figure(fig: go.Figure | Callable[[], go.Figure], name: str, alt: str | None, data) -> None:
    """The "Pin to deck" button's callback: pin the view on screen's figure ``fig``. What happened is said by a toast
    in the run that follows (``pin_button``): an element drawn from a callback inside a fragment is refused."""
    fig = fig() if callable(fig) else fig  # a figure the page does not draw is built when pinned
    page = "" if current_page() == "home" else current_page()
    query = urlencode(view_query())
    pin = Pin(page, query, name, plain_text(fig.layout.title.text) or name, (alt or "").strip(),
              current_model_name(), current_text()[:TEXT_IN_PIN])
    present = pins()
    if any(p.view == pin.view for p in present):
        st.session_state[PIN_TOAST] = ("This figure is in the deck already.", ":material/push_pin:")
        return
    if len(present) >= slide_limit():
        st.session_state[PIN_TOAST] = (limit_sentence(slide_limit()), ":material/block:")
        return
    refused = keep_figure(pin, fig, _table(data), pin.sentence)
    set_pins([*present, pin])
    st.session_state[PIN_TOAST] = (f"Pinned to the deck: slide {len(present) + 1} of at most {slide_limit()}. The Deck "
                                   "page makes the slides." + (f" {refused}" if refused else ""), ":material/push_pin:")


def pin_button(fig: go.Figure | Callable[[], go.Figure], *, name: str, alt: str | None, data, key: str | None) -> None:
    """The "Pin to deck" button under a figure (``show_figure`` draws it beside the downloads); and, when this
    server lost a pinned figure of the view being drawn, keep the figure drawn now. ``fig``: the figure, or a call
    building it (a figure the page does not draw: built only when pinned)."""
    said = st.session_state.pop(PIN_TOAST, None)  # what the last click on a Pin button did
    if said is not None:
        st.toast(said[0], icon=said[1])
    if WANTED:
        view = ("" if current_page() == "home" else current_page(), canonical(drawing_query()), name)
        if view in WANTED:
            pin = Pin(view[0], view[1], name, "", "", current_model_name(), "")
            keep_figure(pin, fig() if callable(fig) else fig, _table(data), (alt or "").strip())
            with _WANTED_LOCK:
                WANTED.discard(view)
    base = f"{key}-pin" if key else f"pin-{name}"
    for attempt in range(1, 50):  # a figure name drawn twice on a page (no chart key): the next free key
        try:
            st.button("Pin to deck", key=base if attempt == 1 else f"{base}-{attempt}", on_click=pin_figure,
                      args=(fig, name, alt, data), icon=":material/push_pin:",
                      help="Add this figure to the slide deck (the Deck page downloads it as PowerPoint or HTML)")
            return
        except StreamlitDuplicateElementKey:
            continue


# --- slides ----------------------------------------------------------------------------------------------------------

def absolute_link(pin: Pin) -> str:
    """``pin``'s link from the address this page was opened at (relative when the app cannot tell it)."""
    try:
        here = st.context.url
    except Exception:  # noqa: BLE001 - no browser context (a test run): the link stays relative
        here = None
    return urljoin(here, pin.link) if here else pin.link


def slides_of(chosen: list[Pin]) -> tuple[list[Slide], list[Pin]]:
    """The slides of the pins whose figures this server keeps, and the pins it does not keep."""
    made, missing = [], []
    for pin in chosen:
        kept = kept_figure(pin)
        if kept is None:
            missing.append(pin)
            continue
        made.append(Slide(kept.figure, pin.title, pin.sentence or kept.sentence, absolute_link(pin), pin.model,
                          pin.text, kept.table, pin.name))
    return made, missing


def moved(chosen: list[Pin], index: int, step: int) -> list[Pin]:
    """``chosen`` with pin ``index`` moved ``step`` places (within the list)."""
    target = min(max(index + step, 0), len(chosen) - 1)
    out = list(chosen)
    out.insert(target, out.pop(index))
    return out


def retitled(chosen: list[Pin], index: int, title: str) -> list[Pin]:
    out = list(chosen)
    out[index] = replace(out[index], title=title)
    return out
