"""Hostile text and links in a real browser: nothing a user types or links ever runs, on any page."""

from __future__ import annotations

import pytest

from tests.pages_registry import landed_pages

pytestmark = pytest.mark.browser

ATTACK = (
    "<script>alert('script')</script> </script><img src=x onerror=alert('img')> bank "
    "[click](javascript:alert('link')) $$\\href{javascript:alert('latex')}{x}$$ <svg onload=alert('svg')> "
    "%{customdata} the river"
)
MODEL_ATTACK = "`[x](javascript:alert('model'))` <img src=x onerror=alert('model')>"


def _injected(page) -> list[str]:
    """Elements that would exist only if user text had been parsed as HTML, in the page or any frame."""
    found = []
    for frame in page.frames:
        for selector in ('img[src="x"]', "svg[onload]", 'a[href^="javascript"]', "script:not([src])"):
            for element in frame.locator(selector).all():
                text = element.evaluate("e => e.outerHTML")
                if "alert(" in text:
                    found.append(f"{frame.url[:40]} {text[:80]}")
    return found


@pytest.mark.parametrize("path", [path for _, path in landed_pages()])
def test_a_crafted_link_runs_nothing(app_page, path):
    page = app_page.open(path, {"text": ATTACK, "text_a": ATTACK, "word": "bank"})
    page.wait_for_timeout(1500)  # let iframes and figures finish drawing
    assert not _injected(page), _injected(page)
    app_page.assert_clean()


def test_hostile_text_typed_into_the_box_runs_nothing(app_page):
    page = app_page.open("attention")
    box = page.locator('[data-testid="stSidebar"]').get_by_label("Text to analyse")
    box.fill(ATTACK)
    box.press("Control+Enter")
    app_page.wait_until_idle()
    page.wait_for_timeout(1500)
    assert not _injected(page), _injected(page)
    app_page.assert_clean()


def test_a_hostile_model_id_is_only_a_message(app_page):
    page = app_page.open("", {"model": MODEL_ATTACK})
    assert app_page.error_texts(), "a bad model id must get a message"
    assert not _injected(page) and not app_page.dialogs and not app_page.blocked
