"""The workshop room page through AppTest: opening a room, the presenter's moderation, the learners' view, hostile
sentences, a learners' link trying to moderate, a closed and an expired room."""

from __future__ import annotations

import sqlite3

import pytest

from core.workshop.rooms import Workshop
from core.workshop.settings import load_room_settings
from core.workshop.stores import open_store
from tests.test_app import open_app, page_errors
from ui.page_state import view_query

pytestmark = [pytest.mark.app, pytest.mark.integration]  # the rooms run on the bundled MiniLM
PAGE = "app_pages/room.py"
MODEL = "all-MiniLM-L6-v2"


@pytest.fixture
def workshop(tmp_path, monkeypatch):
    """A Workshop over the same SQLite file the page uses (the page reads the same environment)."""
    monkeypatch.setenv("EXPLORER_ROOM_STORE", f"sqlite:///{tmp_path / 'rooms.sqlite3'}")
    made = Workshop(open_store(load_room_settings()), load_room_settings())
    yield made
    made.store.close_store()


def button(at, label: str):
    return next(b for b in at.button if b.label == label)


def buttons(at, label: str) -> list:
    return [b for b in at.button if b.label == label]


def markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_open_a_room_gives_a_learners_link_without_the_secret(workshop):
    at = open_app(page=PAGE)
    button(at, "Open a room").click().run()
    assert not page_errors(at)
    query = view_query(at.session_state)
    code, secret = query["room"], query["key"]
    assert workshop.is_presenter(code, secret)
    link = next(m.value for m in at.markdown if m.value.startswith("[Learners' link]"))
    assert f"room={code}" in link and secret not in link
    assert len(at.get("image")) == 1  # the QR code, drawn on the server (segno)


def test_presenter_hides_and_restores_and_the_learner_view_follows(workshop):
    room, secret = workshop.open_room(MODEL, "bank", "senses")
    first = workshop.submit(room.code, "a", "We fished from the bank of the river.")
    workshop.submit(room.code, "b", "The bank approved my loan.")
    at = open_app({"room": room.code, "key": secret}, page=PAGE)
    assert not page_errors(at)
    assert len(buttons(at, "Hide")) == 2
    assert "**2 entries** on screen (0 hidden)" in markdown(at)
    buttons(at, "Hide")[-1].click().run()  # the list is newest first: the last button is the first entry
    assert [e.id for e in workshop.store.entries(room.code) if e.hidden] == [first.id]
    assert "**1 entries** on screen (1 hidden)" in markdown(at)
    learner = open_app({"room": room.code}, page=PAGE)
    assert not page_errors(learner) and not buttons(learner, "Hide")
    csv_text = workshop.csv_text(room.code, secret)
    assert "We fished" in csv_text  # hidden, not deleted
    button(at, "Restore").click().run()
    assert not any(e.hidden for e in workshop.store.entries(room.code))


def test_the_vote_room_reveals_measured_scores_and_the_dark_projector_draws(workshop):
    room, secret = workshop.open_room(MODEL, "", "vote")
    workshop.submit(room.code, "a", "L0H1")
    workshop.submit(room.code, "b", "L0H1")
    at = open_app({"room": room.code, "key": secret}, page=PAGE)
    assert any("2 learners have voted" in c.value for c in at.caption)
    at.toggle(key="room.dark").set_value(True).run()
    button(at, "Reveal the scores").click().run()
    assert not page_errors(at)
    said = markdown(at)
    assert "the chance level" in said and "The room's most voted head is L0H1 (2 of 2 votes)" in said


def test_a_learners_link_with_a_wrong_key_cannot_moderate(workshop):
    room, secret = workshop.open_room(MODEL, "bank", "senses")
    workshop.submit(room.code, "a", "The bank is closed today.")
    at = open_app({"room": room.code, "key": secret[:-2] + "xx"}, page=PAGE)
    assert any("only the presenter's link can moderate" in e.value for e in at.error)
    assert not buttons(at, "Hide") and not buttons(at, "Clear") and not buttons(at, "Close")
    assert [e.hidden for e in workshop.store.entries(room.code)] == [False]


@pytest.mark.parametrize(("text", "stored", "says"), [
    ("<img src=x onerror=alert(1)> **the bank** <script>", True, None),
    ("ذهبت إلى bank النهر", True, None),
    ("bank " + "x" * 99_995, False, "a room takes at most 300"),
    ("", False, "Write a sentence first"),
])
def test_hostile_sentences_are_stored_as_typed_or_refused_in_a_sentence(workshop, text, stored, says):
    room, _ = workshop.open_room(MODEL, "bank", "senses")
    at = open_app({"room": room.code}, page=PAGE)
    at.text_input(key="room.sentence").input(text).run()
    button(at, "Send").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [e.text for e in workshop.store.entries(room.code)] == ([text.strip()] if stored else [])
    if says:
        assert any(says in e.value for e in at.error), [e.value for e in at.error]
    else:
        assert not at.error and any("black star" in s.value for s in at.success)
        assert "nearest (cosine" in markdown(at)
        assert text not in markdown(at)  # shown escaped (st.text, plotly_safe), never as markdown


def test_a_sentence_without_the_word_is_said_before_sending(workshop):
    room, _ = workshop.open_room(MODEL, "bank", "senses")
    at = open_app({"room": room.code}, page=PAGE)
    at.text_input(key="room.sentence").input("We walked along the riverbank.").run()
    assert any("does not contain the word “bank”" in w.value for w in at.warning)
    assert workshop.store.entries(room.code) == []


def test_a_closed_room_says_so_and_keeps_every_entry(workshop):
    room, secret = workshop.open_room(MODEL, "bank", "senses")
    workshop.submit(room.code, "a", "The bank of the river flooded.")
    workshop.moderate(room.code, secret, "close")
    at = open_app({"room": room.code}, page=PAGE)
    assert any("closed this room" in i.value for i in at.info)
    assert button(at, "Send").disabled
    assert [e.text for e in workshop.store.entries(room.code)] == ["The bank of the river flooded."]
    assert not page_errors(at)


def test_an_expired_room_is_a_sentence_and_the_typed_text_stays(workshop, tmp_path):
    room, _ = workshop.open_room(MODEL, "bank", "senses")
    at = open_app({"room": room.code}, page=PAGE)
    at.text_input(key="room.sentence").input("My bank sentence, typed with care.").run()
    with sqlite3.connect(tmp_path / "rooms.sqlite3") as db:  # a day and a half without activity
        db.execute("UPDATE rooms SET touched = touched - 130000")
    button(at, "Send").click().run()
    assert any("without activity" in e.value for e in at.error), [e.value for e in at.error]
    assert at.text_input(key="room.sentence").value == "My bank sentence, typed with care."
    assert not at.exception
