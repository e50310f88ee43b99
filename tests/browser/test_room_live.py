"""A workshop room in two browser contexts: a learner sends a sentence, and the presenter's projector, never
reloaded, shows it by itself (its fragment rereads the room store every 1.5 s)."""

from __future__ import annotations

import time

import pytest

from core.workshop.rooms import Workshop
from core.workshop.settings import load_room_settings
from core.workshop.stores import open_store
from tests.browser.conftest import AppPage, serve_app

pytestmark = pytest.mark.browser


def test_a_learners_sentence_reaches_the_projector_without_a_reload(browser, tmp_path):
    env = {"EXPLORER_ROOM_STORE": f"sqlite:///{tmp_path / 'rooms.sqlite3'}"}
    settings = load_room_settings(environ=env)
    workshop = Workshop(open_store(settings), settings)
    room, secret = workshop.open_room("all-MiniLM-L6-v2", "bank", "senses")
    with serve_app(tmp_path / "streamlit.log", env) as (url, _proc):
        projector, learner = AppPage(browser, url), AppPage(browser, url)
        try:
            screen = projector.page
            screen.goto(f"{url}/room?room={room.code}&key={secret}", wait_until="domcontentloaded")
            screen.get_by_text("0 entries", exact=False).first.wait_for(timeout=120_000)
            loads = screen.evaluate("performance.getEntriesByType('navigation').length")
            page = learner.open("room", {"room": room.code})
            assert page.get_by_role("button", name="Hide").count() == 0
            box = page.get_by_label("Your sentence")
            box.fill("<b>We sat</b> on the bank of the river.")
            box.press("Enter")
            learner.wait_until_idle()
            page.get_by_role("button", name="Send").click()
            page.get_by_text("black star", exact=False).first.wait_for(timeout=60_000)
            sent = time.monotonic()
            screen.get_by_text("1 entries", exact=False).first.wait_for(timeout=15_000)
            waited = time.monotonic() - sent
            assert screen.evaluate("performance.getEntriesByType('navigation').length") == loads  # no reload
            screen.get_by_role("button", name="Hide").first.wait_for(timeout=10_000)  # the rest of the same update
            assert screen.get_by_role("button", name="Hide").count() == 1
            assert screen.get_by_text("<b>We sat</b> on the bank of the river.").count() == 1  # escaped, as typed
            assert screen.locator("[data-testid='stMain'] b", has_text="We sat").count() == 0  # never markup
            print(f"projector showed the entry {waited:.1f} s after the learner saw it sent")
            assert not learner.error_texts() and not projector.error_texts()
        finally:
            projector.close()
            learner.close()
    workshop.store.close_store()
