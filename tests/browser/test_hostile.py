"""Hostile text and links in a real browser: nothing a user types or links ever runs, on any page."""

from __future__ import annotations

import pytest

from tests.browser.axe import require_axe, violations_in
from tests.browser.matrix import theme
from tests.pages_registry import landed_pages

pytestmark = pytest.mark.browser

ATTACK = (
    "<script>alert('script')</script> </script><img src=x onerror=alert('img')> bank "
    "[click](javascript:alert('link')) $$\\href{javascript:alert('latex')}{x}$$ <svg onload=alert('svg')> "
    "%{customdata} the river"
)
MODEL_ATTACK = "`[x](javascript:alert('model'))` <img src=x onerror=alert('model')>"


def injected_texts(page) -> list[str]:
    """Elements that would exist only if user text had been parsed as HTML, in the page or any frame."""
    found = []
    for frame in page.frames:
        for selector in ('img[src="x"]', "svg[onload]", 'a[href^="javascript"]', "script:not([src])"):
            for element in frame.locator(selector).all():
                text = element.evaluate("e => e.outerHTML")
                if "alert(" in text:
                    found.append(f"{frame.url[:40]} {text[:80]}")
    return found


PAGES = [path for _, path in landed_pages()]


@pytest.mark.parametrize("path", PAGES, ids=[p or "home" for p in PAGES])
def test_a_crafted_link_runs_nothing(module_tab, path):
    """Every page opens from a link with its sidebar holding the linked text as it was typed, draws something, and
    runs nothing the link carried. This is ``make test``'s pass over every page on the encoder (``matrix``): the pages
    in the light and the dark theme in turn, each checked with axe-core (WCAG 2 A/AA, ``tests/browser/axe.py``) in its
    theme, the one run of axe-core per page in ``make test`` (``make test-full`` runs it on every view in both themes,
    in and out of presentation mode, ``test_slides``)."""
    require_axe()
    module_tab.forget()
    page = module_tab.open(path, {"text": ATTACK, "text_a": ATTACK, "word": "bank"})
    module_tab.wait_until_drawn()  # iframes and figures drawn, and what they run on load run
    assert not injected_texts(page), injected_texts(page)
    assert page.locator('[data-testid="stSidebar"]').get_by_label("Text to analyse").input_value() == ATTACK
    assert page.locator('[data-testid="stMain"]').inner_text().strip()
    violations = violations_in(page, theme(PAGES.index(path)))
    assert not violations, "\n".join(violations)
    module_tab.assert_clean()


def test_hostile_text_typed_into_the_box_runs_nothing(app_page):
    page = app_page.open("attention")
    box = page.locator('[data-testid="stSidebar"]').get_by_label("Text to analyse")
    box.fill(ATTACK)
    box.press("Control+Enter")
    app_page.wait_until_idle()
    app_page.wait_until_drawn()
    assert not injected_texts(page), injected_texts(page)
    app_page.assert_clean()


def test_a_hostile_model_id_is_only_a_message(app_page):
    page = app_page.open("", {"model": MODEL_ATTACK})
    assert app_page.error_texts(), "a bad model id must get a message"
    assert not injected_texts(page) and not app_page.dialogs and not app_page.blocked


# --- Inputs that once crashed the server (issue 18): the server must survive them and say why ---

REPEATED = "\n".join(["river: We sat on the bank of the river."] * 4 + ["money: We sat on the bank of the river."] * 4)


def _server_alive(base_url: str) -> bool:
    import urllib.request

    with urllib.request.urlopen(base_url + "/_stcore/health", timeout=5) as response:
        return response.status == 200


def test_identical_sense_vectors_through_t_sne_leave_the_server_running(app_page):
    # Before: t-SNE on identical occurrence vectors ended the server process with a segmentation fault
    page = app_page.open("senses", {"source": "Your sentences", "word": "bank", "method": "t-SNE", "layer": "2"},
                         timeout_ms=400_000)
    box = page.get_by_label("One sentence per line", exact=False)
    box.fill(REPEATED)
    box.press("Control+Enter")
    app_page.wait_until_idle(timeout_ms=400_000)
    assert page.get_by_text("drawn as one point", exact=False).count() >= 1
    app_page.assert_clean()
    # the embedding layer repeats token + position vectors across the built-in sentences: t-SNE runs on them
    page = app_page.open("senses", {"word": "bank", "method": "t-SNE", "layer": "0"}, timeout_ms=400_000)
    page.wait_for_selector(".js-plotly-plot .scatterlayer .point", timeout=400_000)
    app_page.assert_clean()
    assert _server_alive(app_page.base_url)


def test_a_token_limit_below_the_special_tokens_is_a_sentence(browser, tmp_path):
    # Before: EXPLORER_MAX_TOKENS=1 raised a tensor size mismatch on the bundled (BERT-style) model
    from tests.browser.conftest import AppPage, serve_app

    with serve_app(tmp_path / "streamlit.log", {"EXPLORER_MAX_TOKENS": "1"}) as (url, _proc):
        tab = AppPage(browser, url)
        try:
            tab.open("attention", {"text": "the bank of a river"}, timeout_ms=400_000)
            errors = tab.error_texts()
            assert any("at least 3" in e for e in errors), errors
            assert not any("Traceback" in e or "Something went wrong" in e for e in errors), errors
            assert _server_alive(url)
        finally:
            tab.close()
