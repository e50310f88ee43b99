"""A server that has just started (``make run``'s ``serve.py``): while it imports PyTorch and transformers (seconds;
the browser is connected after about 1.5 s), the browser loads the charting code through a hidden chart, and then
the home page's figure paints; the hidden chart is never seen. (The "Starting up" message itself shows only when
the wait lasts over half a second, Streamlit's spinner delay, so it is not asserted.)"""

from __future__ import annotations

import pytest

from tests.browser.conftest import AppPage, serve_app

pytestmark = pytest.mark.browser

# Installed before the page's own scripts: remembers what the page showed while it started.
WATCH = """
window.__startup = {preload: false, preloadShown: false};
new MutationObserver(() => {
    const seen = window.__startup;
    for (const plot of document.querySelectorAll('.st-key-plotly-preload .js-plotly-plot')) {
        seen.preload = true;
        if (plot.checkVisibility()) seen.preloadShown = true;
    }
}).observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
"""
HOME_FIGURE_SHOWN = """() => [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot .gtitle')]
    .some(title => title.textContent.includes('Cosine similarity') && title.checkVisibility())"""


def test_a_fresh_server_paints_the_home_figure_and_never_shows_the_preloading_chart(browser, tmp_path):
    with serve_app(tmp_path / "server.log", script="serve.py") as (url, _proc):
        tab = AppPage(browser, url)
        try:
            tab.page.add_init_script(WATCH)
            tab.page.goto(url, wait_until="commit")
            tab.page.wait_for_function(HOME_FIGURE_SHOWN, timeout=180_000)
            tab.wait_until_idle(timeout_ms=180_000)
            seen = tab.page.evaluate("window.__startup")
            assert seen["preload"], "no chart preloaded Plotly while the server imported its libraries"
            assert not seen["preloadShown"], "the preloading chart was visible"
            hidden = tab.page.locator(".st-key-plotly-preload")
            assert hidden.count() <= 1 and (hidden.count() == 0 or not hidden.is_visible())
            visible_plots = tab.page.locator('[data-testid="stMain"] .js-plotly-plot:visible')
            assert visible_plots.count() == 1, "an empty chart shows beside the home page's figure"
            tab.assert_clean()
        finally:
            tab.close()
