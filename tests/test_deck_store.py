"""A shared deck link opened by a process that never drew its figures (another replica, a restarted server) shows
every pinned figure from the pinned figures' store (``core.workshop.pinned``), whatever its page: figures pinned on
Compare and Inside (pages a link cannot draw again, ``ui.view_figures.REDRAWS``), every in-process cache cleared,
nothing drawn again; the PowerPoint has an image slide per pin. A figure past the store's size cap is refused in a
sentence, and the pin stays in the session."""

from __future__ import annotations

import io

import pytest
import streamlit as st
from pptx import Presentation

from core.workshop.pinned import PINNED_FILE, SQLitePinnedStore, pin_limits
from tests.room_fixtures import redis_url  # noqa: F401 - a fixture, used by name
from tests.test_app import open_app, page_errors
from tests.test_deck_link import DECK, downloads, drawn_traces, needs_chromium, pin_at  # noqa: F401 - downloads: a fixture
from ui import deck, view_figures
from ui.store import store

pytestmark = pytest.mark.app
TEXT_A, TEXT_B = "the bank of the river flooded", "she went to the bank for money"


def _pinned(model: str) -> list[deck.Pin]:
    """Two figures pinned from Compare and two from Inside with their Pin to deck buttons (one session each)."""
    at = open_app({"model": model, "text_a": TEXT_A, "text_b": TEXT_B, "word": "bank"}, page="app_pages/compare.py")
    pin_at(at, 0)
    pin_at(at, len([b for b in at.button if b.label == "Pin to deck"]) - 1)
    pinned = list(at.session_state["deck.pins"])
    at = open_app({"model": model, "text": TEXT_A, "layer": "1", "head": "1"}, page="app_pages/inside.py")
    pin_at(at, 0)
    pin_at(at, len([b for b in at.button if b.label == "Pin to deck"]) - 1)
    pinned += list(at.session_state["deck.pins"])
    assert [p.page for p in pinned] == ["compare", "compare", "inside", "inside"]
    assert len({p.name for p in pinned}) == 4
    return pinned


def _forget_everything_in_this_process() -> None:
    """What another replica or a restarted server has: no shelf, no cached result or resource, nothing wanted."""
    store().forget()
    deck.WANTED.clear()
    st.cache_data.clear()
    st.cache_resource.clear()


@needs_chromium
@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_deck_link_shows_every_stored_figure_in_a_process_that_never_drew_them(backend, tiny_bert_dir, request,
                                                                                 monkeypatch, tmp_path, downloads):
    monkeypatch.setenv("EXPLORER_DATA_DIR", str(tmp_path / "data"))
    if backend == "redis":
        url = request.getfixturevalue("redis_url")
        monkeypatch.setenv("EXPLORER_ROOM_STORE", url)
    pinned = _pinned(tiny_bert_dir)
    assert not {p.page for p in pinned} & set(view_figures.REDRAWS)  # a link cannot draw these pages' figures
    drawn = {pin.view: deck.kept_figure(pin).figure for pin in pinned}  # as their pages drew them (the shelf)
    if backend == "sqlite":
        assert (tmp_path / "data" / PINNED_FILE).exists()
    link = deck.encode_pins(pinned)
    _forget_everything_in_this_process()

    def never(pin):
        raise AssertionError(f"{pin.name} was drawn again; it should come from the store")

    monkeypatch.setattr(view_figures, "redraw", never)
    at = open_app({"pins": link}, page=DECK)
    assert not page_errors(at)
    assert not [w.value for w in at.warning]
    assert not [c.value for c in at.caption if "Not drawn yet" in c.value or "open the view" in c.value.lower()]
    assert len(at.get("plotly_chart")) == len(pinned)  # a thumbnail per pin
    for pin in pinned:
        again = deck.kept_figure(pin).figure
        assert again is not drawn[pin.view]
        assert again.layout.title.text == drawn[pin.view].layout.title.text
        assert drawn_traces(again) == drawn_traces(drawn[pin.view])

    at.button(key=next(b.key for b in at.button if b.label == f"Draw the {len(pinned)} slides for PowerPoint")).click()
    at.run()
    assert not page_errors(at)
    data = downloads["Download PowerPoint"]
    prs = Presentation(io.BytesIO(data() if callable(data) else data))
    pictures = [[s for s in slide.shapes if s.shape_type == 13] for slide in prs.slides]  # 13: a picture
    assert sum(1 for p in pictures if p) == len(pinned) and all(len(p) <= 1 for p in pictures)
    titles = ["\n".join(s.text_frame.text for s in slide.shapes if s.has_text_frame) for slide, p in
              zip(prs.slides, pictures, strict=True) if p]
    assert all(pin.title in t for pin, t in zip(pinned, titles, strict=True))


def test_a_figure_past_the_size_cap_is_pinned_in_the_session_and_said_not_shared(tiny_bert_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("EXPLORER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EXPLORER_PIN_FIGURE_MB", "0.001")  # 1,000 bytes: smaller than any figure
    at = open_app({"model": tiny_bert_dir, "text": TEXT_A, "layer": "1", "head": "1"}, page="app_pages/inside.py")
    pin_at(at, 0)
    [pin] = at.session_state["deck.pins"]
    said = " ".join(t.value for t in at.toast)
    assert "Pinned to the deck: slide 1" in said
    assert "more than the 0.001 MB one pinned figure may take" in said and "EXPLORER_PIN_FIGURE_MB" in said
    assert deck.kept_figure(pin) is not None  # this process keeps it
    stored = SQLitePinnedStore(tmp_path / "data" / PINNED_FILE, pin_limits())
    assert stored.get(pin.stored_as) is None and stored.total_bytes() == 0
    stored.close_store()


def test_a_store_that_cannot_be_reached_leaves_pinning_working_and_says_so(tiny_bert_dir, monkeypatch):
    monkeypatch.setenv("EXPLORER_ROOM_STORE", "redis://127.0.0.1:9/0")  # the discard port: nothing answers there
    at = open_app({"model": tiny_bert_dir, "text": TEXT_A, "layer": "1", "head": "1"}, page="app_pages/inside.py")
    pin_at(at, 0)
    [pin] = at.session_state["deck.pins"]
    said = " ".join(t.value for t in at.toast)
    assert "Pinned to the deck: slide 1" in said and "store could not be reached" in said
    assert deck.kept_figure(pin) is not None  # this process keeps it
    store().forget()
    assert deck.kept_figure(pin) is None  # and nothing else does: no error either
