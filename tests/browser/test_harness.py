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
