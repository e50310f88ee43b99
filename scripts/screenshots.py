"""Regenerate docs/screenshots/: every page in presentation mode at 1280 × 720 (a common projector), on the bundled model.

    .venv/bin/python scripts/screenshots.py [--out docs/screenshots] [--width 1280 --height 720]

Starts the app on a free localhost port, opens each page with ``?present=true`` in Debian's
Chromium (every request to another host is blocked), waits until its figures have drawn and
saves one PNG per page (the top of the page, as a presenter opens it), named after the page's
URL path (``home.png`` for the home page).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser.conftest import CHROMIUM, CHROMIUM_FLAGS, AppPage, serve_app  # noqa: E402
from tests.pages_registry import landed_pages  # noqa: E402

# Every chart has drawn; a page without charts (predictions on a model without a head) shows a message instead.
CHARTS_DRAWN = """() => { const charts = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stPlotlyChart"]')];
    return charts.length ? charts.every(c => c.querySelector('.js-plotly-plot .main-svg'))
                         : !!document.querySelector('[data-testid="stMain"] [data-testid="stAlert"]'); }"""


def take(out: Path, width: int, height: int) -> list[Path]:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    saved = []
    with tempfile.TemporaryDirectory() as tmp, serve_app(Path(tmp) / "streamlit.log") as (url, _server):
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
            tab = AppPage(browser, url)
            tab.page.set_viewport_size({"width": width, "height": height})
            for _file, path in landed_pages():
                page = tab.open(path, {"present": "true"}, timeout_ms=300_000)
                page.wait_for_function(CHARTS_DRAWN, timeout=120_000)
                page.wait_for_timeout(1500)  # Plotly's last redraw after the layout settles
                target = out / f"{path or 'home'}.png"
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
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=720)
    args = parser.parse_args()
    take(args.out, args.width, args.height)


if __name__ == "__main__":
    main()
