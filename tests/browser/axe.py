"""WCAG 2 A/AA in a real browser: axe-core (npm, pinned in package-lock.json) on the page as drawn.

``test_slides`` runs it on every page and tour step, as a page and in presentation mode, in the light system theme and
again after the system switches to dark (Streamlit follows it without a reload): the same page load that is measured
for slides, so each view is loaded once for both. A serious or critical violation fails the test, listed by rule,
impact, element and axe's own summary of what is wrong.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.browser.conftest import NEXT_FRAMES, ROOT

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")
APP_IS_DARK = """() => { const c = getComputedStyle(document.querySelector('[data-testid="stApp"]')).backgroundColor
    .match(/\\d+/g).map(Number); return c[0] + c[1] + c[2] < 200; }"""
# No CSS transition is running (a colour read in the middle of one would be neither theme's).
NO_COLOUR_TRANSITION = """() => document.getAnimations()
    .every(a => !(a instanceof CSSTransition) || a.playState !== 'running')"""
RUN_AXE = """async () => {
    const results = await axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa']}});
    return results.violations.flatMap(v => v.nodes.map(n => ({
        rule: v.id, impact: n.impact || v.impact, target: n.target.join(' '),
        summary: (n.failureSummary || v.help).replace(/\\s+/g, ' ')})));
}"""


def require_axe() -> None:
    """Skip (fail in CI) when axe-core is not installed."""
    if not AXE.exists():
        reason = "axe-core is not installed: run scripts/ensure_axe.sh (make browser does)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def blocking_violations(page) -> list[str]:
    """axe-core's serious and critical WCAG 2 A/AA violations on the page as drawn, one line per element."""
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    found = page.evaluate(RUN_AXE)
    return [f"{v['rule']} ({v['impact']}) at {v['target']}: {v['summary']}" for v in found if v["impact"] in BLOCKING]


@contextmanager
def dark_theme(page) -> Iterator[None]:
    """The system switched to a dark colour scheme (Streamlit follows it without a reload), then back to light."""
    page.emulate_media(color_scheme="dark")
    try:
        page.wait_for_function(APP_IS_DARK, timeout=10_000)
        yield
    finally:
        page.emulate_media(color_scheme="light")


def violations_in(page, theme: str) -> list[str]:
    """``blocking_violations`` with the system in the ``"light"`` or the ``"dark"`` colour scheme; the page is left
    light."""
    page.emulate_media(color_scheme="light")
    if theme == "light":
        found = blocking_violations(page)
    else:
        with dark_theme(page):
            page.evaluate(NEXT_FRAMES)  # the new theme's styles have been computed: its colour transitions have begun
            page.wait_for_function(NO_COLOUR_TRANSITION, polling="raf", timeout=10_000)  # axe reads the colours they end at
            found = blocking_violations(page)
    return [f"{len(found)} serious/critical WCAG 2 A/AA violation(s): {theme}: {v}" for v in found]


def violations_in_light_and_dark(page) -> list[str]:
    """``violations_in`` the light system theme, then in the dark one; the page is left light."""
    return violations_in(page, "light") + violations_in(page, "dark")
