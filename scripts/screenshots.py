"""Regenerate docs/screenshots/: the README's pictures of real pages, drawn by the app itself (``make screenshots``).

    .venv/bin/python scripts/screenshots.py [--out docs/screenshots] [--only NAME ...]

Starts the app on a free localhost port with the hub switched off, opens each page of ``SHOTS`` in Debian's
Chromium (every request to another host is blocked), waits until its figures have drawn, scrolls to the part
the shot is about, and saves one PNG per shot, 1280 pixels wide (``NAME.png``). Re-run it when a
page changes; the README links every file it writes, and ``tests/test_docs.py`` checks that each one exists.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser.conftest import CHROMIUM, CHROMIUM_FLAGS, AppPage, serve_app  # noqa: E402 - after the project folder is on the path

WIDTH, HEIGHT = 1280, 800
CHART = '[data-testid="stPlotlyChart"]'


@dataclass(frozen=True)
class Shot:
    """One picture: page ``path`` opened with ``query``, ``height`` pixels tall; ``scroll_to`` (a CSS selector inside
    the page's main area, "" = none) is scrolled to just below the app's header."""

    name: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    scroll_to: str = ""
    height: int = HEIGHT


SHOTS = [
    Shot("home", ""),
    Shot("attention", "attention", scroll_to=CHART),
    Shot("tour", "tour", {"step": "4", "present": "true"}, scroll_to="h2", height=840),  # the step title and its figure
    Shot("senses", "senses", scroll_to=CHART),
    Shot("language-model", "predictions", {"model": "SmolLM2-135M-Instruct", "text": "The capital of France is"}),
]

# Every chart has drawn; a page without charts shows a message or a table instead.
CHARTS_DRAWN = """() => { const charts = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stPlotlyChart"]')];
    return charts.length ? charts.every(c => c.querySelector('.js-plotly-plot .main-svg'))
                         : !!document.querySelector('[data-testid="stMain"] [data-testid="stAlert"], '
                                                    + '[data-testid="stMain"] [data-testid="stDataFrame"]'); }"""
SCROLL_TO = """(selector) => { const element = document.querySelector('[data-testid="stMain"] ' + selector);
    if (element) { element.style.scrollMarginTop = '60px'; element.scrollIntoView({block: 'start'}); } }"""


def take(out: Path, shots: list[Shot]) -> list[Path]:
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 - optional (requirements-dev.txt): only to take shots

    out.mkdir(parents=True, exist_ok=True)
    saved = []
    with tempfile.TemporaryDirectory() as tmp, serve_app(Path(tmp) / "streamlit.log") as (url, _server):
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
            tab = AppPage(browser, url)
            for shot in shots:
                tab.page.set_viewport_size({"width": WIDTH, "height": shot.height})
                page = tab.open(shot.path, shot.query, timeout_ms=300_000)
                page.wait_for_function(CHARTS_DRAWN, timeout=120_000)
                if shot.scroll_to:
                    page.evaluate(SCROLL_TO, shot.scroll_to)
                page.wait_for_timeout(1500)  # Plotly's last redraw after the layout settles
                if tab.error_texts():
                    raise SystemExit(f"{shot.name}: the page shows an error: {tab.error_texts()}")
                target = out / f"{shot.name}.png"
                page.screenshot(path=str(target))
                saved.append(target)
                print(f"{target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}", flush=True)
            if tab.blocked:
                raise SystemExit(f"the app asked for other hosts: {tab.blocked}")
            tab.close()
            browser.close()
    return saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--only", nargs="*", choices=[s.name for s in SHOTS], help="these shots only")
    args = parser.parse_args()
    take(args.out, [s for s in SHOTS if not args.only or s.name in args.only])


if __name__ == "__main__":
    main()
