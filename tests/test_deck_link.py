"""A shared deck link opened in a fresh session (issue 53): with no figure kept on the server, the Deck page draws every
pin's figure again from its link (``ui.view_figures``), the same figure its page drew, so the thumbnails, the HTML and
the PowerPoint work from the link alone; a pin whose figure needs what a link does not carry says so on its slide; a
hostile title in the link stays text."""

from __future__ import annotations

import html
import io
import os

import numpy as np
import pytest
import streamlit as st
from pptx import Presentation

from tests.test_app import open_app, page_errors
from ui import deck
from ui.page_state import view_query
from ui.store import store
from viz.common import file_stem
from viz.deck_render import CHROMIUM

DECK = "app_pages/deck.py"
HOSTILE = '</script><script>alert("x")</script> & <b>bold</b> [link](javascript:alert(1))'
needs_chromium = pytest.mark.skipif(not os.path.exists(CHROMIUM) and not os.environ.get("CI"),
                                    reason="no Chromium to draw the slides with")


def pin_at(at, index: int = 0) -> None:
    [b for b in at.button if b.label == "Pin to deck"][index].click().run()
    assert not page_errors(at)


def drawn_traces(fig) -> list:
    """Every trace's drawn numbers and labels (z, x, y, text) as plain lists."""
    out = []
    for trace in fig.data:
        for field in ("z", "x", "y", "text"):
            value = getattr(trace, field, None)
            if value is not None:
                out.append((field, np.asarray(value, dtype=object).tolist()))
    return out


def _pinned_by_hand(model: str) -> tuple[list[deck.Pin], dict]:
    """Pins from five or six pages (Home's heatmap, Attention's overview and one head, Head statistics' heatmap,
    Maxima's grid and maps of one layer, Long context's sink grid and one layer's sink map, a language model's
    next-token guesses on Predictions), made with their Pin to deck buttons; and each pin's figure as its page drew
    it."""
    text = "the bank of the river flooded"
    at = open_app({"model": model, "text": text}, page="app_pages/home.py")
    pin_at(at)
    at = open_app({"model": model, "text": text, "layer": "1", "head": "1"}, page="app_pages/attention.py")
    pin_at(at, 0)  # the overview
    pin_at(at, 1)  # layer 1, head 1
    pinned = list(at.session_state["deck.pins"])
    at = open_app({"model": model, "text": text, "stat": "previous"}, page="app_pages/stats.py")
    pin_at(at, 0)
    pinned += list(at.session_state["deck.pins"])
    at = open_app({"model": model, "text": text, "heads": "one head", "head": "1", "layer": "1"},
                  page="app_pages/maxima.py")
    pin_at(at, 0)  # the most-attended tokens of head 1
    pin_at(at, 1)  # raw, norm-weighted and rollout maps of layer 1
    pinned += list(at.session_state["deck.pins"])
    at = open_app({"model": model, "text": text, "source": "sidebar", "measure": "sink", "layer": "1"},
                  page="app_pages/long-context.py")
    pin_at(at, 0)  # every head's share on the sink
    pin_at(at, 2)  # layer 1's heads on the first token, by query position
    pinned += list(at.session_state["deck.pins"])
    assert [p.page for p in pinned] == ["attention", "attention", "stats", "maxima", "maxima", "long-context",
                                        "long-context"]
    at = open_app({"model": model, "text": text, "top_k": "3"}, page="app_pages/predictions.py")
    if any(b.label == "Pin to deck" for b in at.button):  # a model with a language-model head: its guesses
        pin_at(at, 0)
        pinned += list(at.session_state["deck.pins"])
    home = open_app({"model": model, "text": text}, page="app_pages/home.py")
    pin_at(home)
    pinned = [*home.session_state["deck.pins"], *pinned]
    drawn = {pin.view: deck.kept_figure(pin).figure for pin in pinned}
    assert all(drawn.values())
    return pinned, drawn


@pytest.fixture
def downloads(monkeypatch):
    """What the Deck page's download buttons would hand the browser, by label (the data, or the function making it)."""
    seen: dict = {}
    real = st.download_button

    def recording(label, data, *args, **kwargs):
        seen[label] = data
        return real(label, data, *args, **kwargs)

    monkeypatch.setattr(st, "download_button", recording)
    return seen


def _fresh_server(monkeypatch, folder) -> None:
    """What a restart on an empty disk leaves: no kept result, no figure kept or stored (the pinned figures' store,
    ``core.workshop.pinned``, is the one in the empty data folder ``folder``), nothing wanted."""
    store().forget()
    deck.WANTED.clear()
    monkeypatch.setenv("EXPLORER_DATA_DIR", str(folder))


@needs_chromium
@pytest.mark.app
@pytest.mark.parametrize("model", ["tiny_bert_dir", "tiny_gpt2_dir", "all-MiniLM-L6-v2"])
def test_a_shared_deck_link_draws_every_figure_again_in_a_fresh_session(model, request, downloads, monkeypatch,
                                                                       tmp_path):
    name = request.getfixturevalue(model) if model.endswith("_dir") else model
    pinned, drawn = _pinned_by_hand(name)
    pinned[1] = deck.retitled(pinned, 1, HOSTILE)[1]
    link = deck.encode_pins(pinned)
    _fresh_server(monkeypatch, tmp_path / "empty")
    assert all(deck.kept_figure(pin) is None for pin in pinned)

    at = open_app({"pins": link}, page=DECK)
    assert not page_errors(at)
    assert not [w.value for w in at.warning]  # no pin is left undrawn
    assert len(pinned) == (9 if model == "tiny_gpt2_dir" else 8)  # GPT-2's next-token guesses too
    assert len(at.get("plotly_chart")) == len(pinned)  # a thumbnail per pin (the page's only charts)
    for pin in pinned:  # the page's own figure: the same numbers, labels and title
        again = deck.kept_figure(pin).figure
        assert again is not drawn[pin.view]
        assert again.layout.title.text == drawn[pin.view].layout.title.text
        assert drawn_traces(again) == drawn_traces(drawn[pin.view])
    assert decode_titles(at) == [p.title for p in pinned]

    page = downloads["Download HTML"]()
    body = page.decode("utf-8")[page.decode("utf-8").index("<body>"):]
    assert '<script>alert("x")</script>' not in body and html.escape(HOSTILE) in body

    at.button(key=next(b.key for b in at.button if b.label.startswith(f"Draw the {len(pinned)} slides"))).click().run()
    assert not page_errors(at)
    data = downloads["Download PowerPoint"]
    prs = Presentation(io.BytesIO(data() if callable(data) else data))
    pictures = [[s for s in slide.shapes if s.shape_type == 13] for slide in prs.slides]
    assert sum(1 for p in pictures if p) == len(pinned) and all(len(p) <= 1 for p in pictures)
    texts = ["\n".join(s.text_frame.text for s in slide.shapes if s.has_text_frame) for slide in prs.slides]
    assert any(HOSTILE in t for t in texts)  # kept as text, as written


def decode_titles(at) -> list[str]:
    return [p.title for p in deck.decode_pins(view_query(at.session_state)["pins"])]


@pytest.mark.app
def test_a_pin_its_link_cannot_draw_says_why_on_its_slide(tiny_bert_dir, monkeypatch, tmp_path):
    corpus = deck.Pin("stats", f"model={tiny_bert_dir}&over=corpus", "x-head-stats-entropy-corpus", "Corpus", "",
                      tiny_bert_dir, "")
    unknown = deck.Pin("needle", f"model={tiny_bert_dir}", "needle-grid", "Needle", "", tiny_bert_dir, "")
    _fresh_server(monkeypatch, tmp_path / "empty")
    at = open_app({"pins": deck.encode_pins([corpus, unknown])}, page=DECK)
    assert not page_errors(at)
    captions = [c.value for c in at.caption]
    assert any("corpus loaded on the Drift page, which a link does not carry" in c for c in captions)
    assert any("not drawn again from a link yet" in c for c in captions)
    assert any("2 pinned figures could not be drawn again from their links" in w.value for w in at.warning)



@pytest.mark.app
def test_drawing_again_stopped_keeps_the_deck_and_goes_on_when_asked(tiny_bert_dir, tiny_bert, monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest

    from tests.test_app import APP

    pin = deck.Pin("", f"model={tiny_bert_dir}&text=a+river+bank", file_stem(tiny_bert.name, "static-similarity"), "Tokens", "", tiny_bert_dir,
                   "a river bank")
    _fresh_server(monkeypatch, tmp_path / "empty")
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["pins"] = deck.encode_pins([pin])
    at.switch_page(DECK)
    at.session_state["deck.redraw-stopped"] = (pin.view,)  # Stop clicked while this pin was being drawn
    at.run()
    assert not page_errors(at)
    assert deck.kept_figure(pin) is None and not at.get("plotly_chart")
    assert any("was stopped with 1 left" in i.value for i in at.info)
    at.button(key="deck-redraw-go-on").click().run()
    assert not page_errors(at)
    assert not [c.value for c in at.caption if "not drawn" in c.value or "another figure" in c.value]
    assert len(at.get("plotly_chart")) == 1 and deck.kept_figure(pin) is not None
