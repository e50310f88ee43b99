"""The Pin to deck button and the Deck page through AppTest (issue 53): a pin keeps the view's link, title, sentence,
model and text; the Deck page lists it, writes the deck into its link, reorders, retitles and removes; a followed
link gives the same deck; a damaged link and the slide limit are said in sentences."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

from tests.test_app import open_app, page_errors
from ui import deck
from ui.deck import decode_pins
from ui.page_state import view_query

DECK = "app_pages/deck.py"
ATTENTION = "app_pages/attention.py"


def _pin_buttons(at):
    return [b for b in at.button if b.label == "Pin to deck"]


def _pinned(at):
    return list(at.session_state["deck.pins"]) if "deck.pins" in at.session_state else []


@pytest.mark.app
def test_every_figure_has_pin_to_deck_and_a_pin_keeps_the_view(tiny_bert_dir):
    at = open_app({"model": tiny_bert_dir, "text": "the bank of a river"}, page=ATTENTION)
    assert not page_errors(at)
    charts, buttons = at.get("plotly_chart"), _pin_buttons(at)
    # one beside every figure, and one under the head switch (the head's figure, built when pinned)
    assert charts and len(buttons) == len(charts) + 1
    shown = dict(view_query(at.session_state))
    buttons[0].click().run()
    assert not page_errors(at)
    (pin,) = _pinned(at)
    assert pin.page == "attention" and pin.model == tiny_bert_dir and pin.text == "the bank of a river"
    assert dict(parse_qsl(pin.query)) == shown  # the view's link: its URL parameters as on screen
    assert pin.title and pin.title != pin.name
    _pin_buttons(at)[0].click().run()  # the same figure again: not pinned twice
    assert len(_pinned(at)) == 1

    at.switch_page(DECK).run()
    assert not page_errors(at)
    assert at.text_input(key=next(k for k in at.session_state if str(k).startswith("deck.pin-title."))).value == pin.title
    assert [b.label for b in at.get("download_button")][:2] == ["Download HTML", "Download PowerPoint"]
    query = view_query(at.session_state)
    assert decode_pins(query["pins"]) == [pin]  # the Deck page's link holds the deck

    # the link followed in a new session gives the same deck, its figure kept on this server
    again = open_app({"pins": query["pins"], "title": "Heads"}, page=DECK)
    assert not page_errors(again)
    assert _pinned(again) == [pin]
    assert again.text_input(key="deck.title").value == "Heads"
    assert not [w for w in again.warning if "not kept" in w.value]


@pytest.mark.app
def test_the_head_the_switch_shows_is_pinned_with_its_figure_built_on_the_click(tiny_bert_dir):
    at = open_app({"model": tiny_bert_dir, "text": "the bank of a river", "layer": "1", "head": "2"}, page=ATTENTION)
    assert not page_errors(at)
    assert not [c for c in at.get("plotly_chart") if c.proto.id.endswith("-attention-head")]  # not drawn
    next(b for b in _pin_buttons(at) if b.key == "attention-head-pin").click().run()
    assert not page_errors(at)
    (pin,) = _pinned(at)
    assert pin.name.endswith("layer-1-head-2") and "layer 1, head 2" in pin.title, pin
    kept = deck.kept_figure(pin)
    assert kept is not None and "layer 1, head 2" in kept.figure.layout.title.text


@pytest.mark.app
def test_the_deck_page_reorders_retitles_and_removes(tiny_bert_dir):
    at = open_app({"model": tiny_bert_dir, "text": "the bank of a river"}, page=ATTENTION)
    for index in range(2):
        _pin_buttons(at)[index].click().run()
    first, second = _pinned(at)
    at.switch_page(DECK).run()
    at.button(key="deck-down-0").click().run()
    assert _pinned(at) == [second, first]
    title_key = next(k for k in at.session_state if str(k).startswith("deck.pin-title.0."))
    at.text_input(key=title_key).input("<b>My</b> slide").run()
    assert _pinned(at)[0].title == "<b>My</b> slide"
    at.button(key="deck-remove-0").click().run()
    assert _pinned(at) == [first]
    assert decode_pins(view_query(at.session_state)["pins"]) == [first]
    assert not page_errors(at)


@pytest.mark.app
def test_a_damaged_deck_link_and_the_slide_limit_are_sentences(tiny_bert_dir, monkeypatch):
    at = open_app({"pins": "1.<script>alert(1)</script>"}, page=DECK)
    assert not page_errors(at)
    assert any("could not be read" in w.value or "not one this app wrote" in w.value for w in at.warning)
    monkeypatch.setenv("EXPLORER_MAX_DECK_SLIDES", "1")
    at = open_app({"model": tiny_bert_dir, "text": "the bank of a river"}, page=ATTENTION)
    _pin_buttons(at)[0].click().run()
    _pin_buttons(at)[1].click().run()
    assert len(_pinned(at)) == 1
    assert any("at most 1 slide (" in t.value for t in at.toast)
    at.switch_page(DECK).run()
    assert any("A deck holds at most 1 slide (" in c.value for c in at.caption)
