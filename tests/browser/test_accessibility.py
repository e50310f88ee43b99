"""WCAG 2 A/AA in a real browser: axe-core (npm, pinned in package-lock.json) on every page and tour step.

Each view is loaded as a page and in presentation mode, and checked in the light
system theme, then again after the system switches to dark (Streamlit follows it without a reload). A serious or critical violation fails the test,
listed by rule, impact, element and axe's own summary of what is wrong.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser.conftest import EVERY_CHART_DRAWN, ROOT, AppPage
from tests.pages_registry import landed_pages

pytestmark = pytest.mark.browser

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
TOUR_STEPS = 10
# Every page but the tour's default view, which is its step 1; then every tour step.
VIEWS = [(path, {}) for _, path in landed_pages() if path != "tour"] + [
    ("tour", {"step": str(step)}) for step in range(1, TOUR_STEPS + 1)
]
VIEW_IDS = [f"tour-{query['step']}" if query else (path or "home") for path, query in VIEWS]
# Every view in both modes: presentation mode restyles the shell, folds the explanations and draws figures as slides.
CASES = [(path, query, present) for present in (False, True) for path, query in VIEWS]
CASE_IDS = [f"{view_id}-{'present' if present else 'page'}" for present in (False, True) for view_id in VIEW_IDS]
BLOCKING = ("serious", "critical")
APP_IS_DARK = """() => { const c = getComputedStyle(document.querySelector('[data-testid="stApp"]')).backgroundColor
    .match(/\\d+/g).map(Number); return c[0] + c[1] + c[2] < 200; }"""
RUN_AXE = """async () => {
    const results = await axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa']}});
    return results.violations.flatMap(v => v.nodes.map(n => ({
        rule: v.id, impact: n.impact || v.impact, target: n.target.join(' '),
        summary: (n.failureSummary || v.help).replace(/\\s+/g, ' ')})));
}"""


def _require_axe() -> None:
    if not Path(AXE).exists():
        reason = "axe-core is not installed: run scripts/ensure_axe.sh (make browser does)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="module")
def tab(browser, app_server):
    _require_axe()
    tab = AppPage(browser, app_server)
    yield tab
    tab.close()


def blocking_violations(page) -> list[str]:
    """axe-core's serious and critical WCAG 2 A/AA violations on the page as drawn, one line per element."""
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    found = page.evaluate(RUN_AXE)
    return [f"{v['rule']} ({v['impact']}) at {v['target']}: {v['summary']}" for v in found if v["impact"] in BLOCKING]


@pytest.mark.parametrize(("path", "query", "present"), CASES, ids=CASE_IDS)
def test_no_serious_wcag_violation_in_light_and_dark_theme(tab, path, query, present):
    page = tab.page
    page.emulate_media(color_scheme="light")
    tab.open(path, query | ({"present": "true"} if present else {}), timeout_ms=300_000)
    page.wait_for_function(EVERY_CHART_DRAWN, timeout=120_000)
    problems = [f"light: {v}" for v in blocking_violations(page)]
    page.emulate_media(color_scheme="dark")
    try:
        page.wait_for_function(APP_IS_DARK, timeout=10_000)
        page.wait_for_timeout(300)  # the theme's colours reach every element in the next frames
        problems += [f"dark: {v}" for v in blocking_violations(page)]
    finally:
        page.emulate_media(color_scheme="light")
    assert not problems, f"{len(problems)} serious/critical WCAG 2 A/AA violations:\n" + "\n".join(problems)
    tab.assert_clean()
