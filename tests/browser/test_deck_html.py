"""The downloaded HTML deck in Chromium (issue 53), served from localhost with every other host blocked: every figure
paints, nothing is requested elsewhere, no console error, the arrow keys move between slides, and a hostile title or
text runs no script."""

from __future__ import annotations

import functools
import http.server
import threading
from urllib.parse import urlparse

import plotly.graph_objects as go
import pytest

from tests.browser.conftest import LOCAL_HOSTS
from viz.deck import Deck, Slide, slide_figure
from viz.deck_html import html_deck

pytestmark = pytest.mark.browser
HOSTILE = '</script><script>window.hacked = 1</script><img src=x onerror="window.hacked = 2">'


@pytest.fixture
def served(tmp_path):
    """``tmp_path`` served on a localhost port; yields its base URL."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _deck(theme: str) -> tuple[Deck, list[go.Figure]]:
    figures = [go.Figure(go.Heatmap(z=[[0.1, 0.9], [0.4, 0.6]]), layout={"title": {"text": HOSTILE}}),
               go.Figure(go.Bar(x=["a", "b"], y=[1, 2]), layout={"title": {"text": "Bars"}})]
    slides = tuple(Slide(fig, f"Slide {i} {HOSTILE}", f"Caption {i} {HOSTILE}", "http://localhost/attention?layer=1",
                         "tiny", HOSTILE) for i, fig in enumerate(figures, start=1))
    deck = Deck(f"Deck {HOSTILE}", HOSTILE, "2026-11-28", (HOSTILE,), "About", slides, theme)
    return deck, [slide_figure(fig, 1232, theme) for fig in figures]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_html_deck_paints_every_figure_offline_and_moves_with_the_arrow_keys(browser, served, tmp_path, theme):
    deck, figures = _deck(theme)
    (tmp_path / "deck.html").write_text(html_deck(deck, figures), encoding="utf-8")
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    elsewhere, errors = [], []
    page.on("request", lambda r: urlparse(r.url).hostname not in LOCAL_HOSTS and elsewhere.append(r.url))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{served}/deck.html")
        page.wait_for_function("() => document.body.dataset.painted === '2'", timeout=60_000)
        painted = page.evaluate("""() => [...document.querySelectorAll('.figure')].map(f =>
            f.querySelectorAll('.main-svg').length > 0 && f.getBoundingClientRect().height > 200)""")
        assert painted == [True, True]
        assert page.evaluate("() => document.querySelectorAll('.figure .heatmaplayer image, .figure .bars path').length") >= 2
        current = "() => [...document.querySelectorAll('.slide')].findIndex(s => s.classList.contains('current'))"
        assert page.evaluate(current) == 0
        for expected in (1, 2, 3):
            page.keyboard.press("ArrowRight")
            assert page.evaluate(current) == expected
        page.keyboard.press("ArrowRight")  # past the last slide: stays there
        assert page.evaluate(current) == 3
        page.keyboard.press("ArrowLeft")
        assert page.evaluate(current) == 2
        page.keyboard.press("Home")
        assert page.evaluate(current) == 0
        assert page.evaluate("() => window.hacked") is None  # no text ran as a script
        assert page.locator("h1").inner_text() == f"Deck {HOSTILE}"  # shown as the text it is
        page.emulate_media(media="print")
        assert page.evaluate("""() => [...document.querySelectorAll('.slide')]
            .every(s => getComputedStyle(s).visibility === 'visible')""")  # printed: every slide on a page
    finally:
        page.close()
    assert not elsewhere, elsewhere
    assert not errors, errors
