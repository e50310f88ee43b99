"""The browser harness itself: a page is idle only once every element is drawn, not merely once the script has run.

The frontend loads the code of most element types (metrics, widgets, charts) on first use and shows a skeleton
until it arrives; on a loaded machine that took seconds after the run, and tests that counted elements at "idle"
failed at random (the effects page's metric seemed missing, as if the link's heads had not been applied).
"""

from __future__ import annotations

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser.conftest import AppPage, serve_app

pytestmark = pytest.mark.browser

SCRIPT = 'import streamlit as st\nst.markdown("drawn at once")\nst.metric("Cosine", "0.99")\n'


def test_a_page_is_not_idle_while_an_elements_code_is_still_loading(browser, tmp_path):
    script = tmp_path / "one_metric.py"
    script.write_text(SCRIPT)
    with serve_app(tmp_path / "streamlit.log", script=str(script)) as (url, _proc):
        tab = AppPage(browser, url)
        try:
            held = []
            tab.page.route("**/static/js/Metric.*.js", lambda route: held.append(route))  # the metric's code arrives only when released
            tab.page.goto(url, wait_until="domcontentloaded")
            tab.page.wait_for_selector("text=drawn at once", timeout=60_000)
            tab.page.wait_for_function(
                "document.querySelector('[data-testid=\"stApp\"]').getAttribute('data-test-script-state') === 'notRunning'",
                timeout=60_000,
            )
            assert held, "the metric's code was not requested"
            with pytest.raises(PlaywrightTimeout):
                tab.wait_until_idle(timeout_ms=3_000, require_sidebar=False)
            assert tab.page.locator('[data-testid="stMetric"]').count() == 0  # the script ran; the metric is not drawn
            for route in held:
                route.continue_()
            tab.wait_until_idle(timeout_ms=60_000, require_sidebar=False)
            assert tab.page.locator('[data-testid="stMetric"]').count() == 1
        finally:
            tab.close()


def test_a_request_to_another_host_is_blocked_in_chromium_and_recorded(app_page):
    """Chromium itself fails it (the proxy on a closed port, not the missing network), and the tab records its URL."""
    page = app_page.open("")
    failures = {}
    page.on("requestfailed", lambda request: failures.setdefault(request.url, request.failure))
    outside = ["http://example.com/x.js", "https://93.184.216.34/font.woff2", "http://[2606:2800:220:1::]/y"]
    said = page.evaluate("""async (urls) => Promise.all(urls.map(u => fetch(u, {mode: 'no-cors'})
        .then(() => 'loaded', e => 'failed: ' + e.message)))""", outside)
    assert all(s.startswith("failed") for s in said), said
    assert app_page.blocked == outside
    assert all("ERR_PROXY_CONNECTION_FAILED" in (failures.get(u) or "") for u in outside), failures
    local = page.evaluate("async () => (await fetch('/_stcore/health')).status")
    assert local == 200  # the app's own host is not proxied
    assert sum("ERR_PROXY_CONNECTION_FAILED" in e for e in app_page.console_errors) == len(outside)
    app_page.forget()  # requested on purpose: the fixture's checks are for the app's own requests
