"""First page painted after the server starts: from ``make run``'s command to the home page's first figure.

The command is ``streamlit run serve.py`` when the project has ``serve.py`` (it loads the bundled
model as the server starts), else ``streamlit run app.py`` (the code before that existed).

The browser is launched before the clock starts (a learner's browser is already open). The
clock starts when the server process is spawned; the tab asks for the page as soon as the
health endpoint answers, and the time is taken when a figure is in the page and two frames
have painted. ``RUNS`` fresh servers; the median is reported. Target: <= 6 s.
The server's CPU-seconds at the health check and at the paint are reported too: on a machine loaded by
other work they are the comparable figures (wall times stretch with the load, CPU-seconds barely do).
Run with ``python -m bench startup``.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

RUNS = 3
TIMEOUT = 180
FIGURE = """() => {
    const shown = [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot .main-svg')]
        .some(svg => svg.checkVisibility());  // not the hidden chart that preloads Plotly during start-up
    if (!shown) return false;
    return new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(true))));
}"""


def _one_run(browser, log_path: Path) -> dict:
    from bench import cpu_seconds
    from tests.browser.conftest import ROOT, AppPage, serve_app

    entry = "serve.py" if (ROOT / "serve.py").exists() else "app.py"
    started = time.perf_counter()  # serve_app spawns the server first thing, then waits for its health check
    with serve_app(log_path, script=entry) as (url, proc):
        healthy = time.perf_counter() - started
        cpu_healthy = cpu_seconds(proc.pid)
        tab = AppPage(browser, url)
        try:
            tab.page.goto(url, wait_until="commit")
            tab.page.wait_for_function(FIGURE, timeout=TIMEOUT * 1000, polling="raf")
            painted = time.perf_counter() - started
            cpu_painted = cpu_seconds(proc.pid)
            errors = tab.error_texts()
        finally:
            tab.close()
    return {"server_answers_seconds": round(healthy, 2), "first_figure_seconds": round(painted, 2),
            "server_cpu_seconds_at_health": round(cpu_healthy, 2), "server_cpu_seconds_at_first_figure": round(cpu_painted, 2),
            "errors": errors}


def main() -> dict:
    from playwright.sync_api import sync_playwright

    from tests.browser.conftest import CHROMIUM, CHROMIUM_FLAGS

    runs = []
    load_before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        for i in range(RUNS):
            run = _one_run(browser, Path(tmp) / f"server-{i}.log")
            print(f"  run {i + 1}: server answers after {run['server_answers_seconds']} s "
                  f"({run['server_cpu_seconds_at_health']} CPU-s), first figure painted after {run['first_figure_seconds']} s "
                  f"({run['server_cpu_seconds_at_first_figure']} server CPU-s)", flush=True)
            runs.append(run)
        browser.close()
    result = {
        "runs": runs,
        "median_first_figure_seconds": statistics.median(r["first_figure_seconds"] for r in runs),
        "median_server_cpu_seconds_at_first_figure": statistics.median(r["server_cpu_seconds_at_first_figure"] for r in runs),
        "load_average_before": load_before,
    }
    print(f"  median: {result['median_first_figure_seconds']} s from process start to the first figure, "
          f"{result['median_server_cpu_seconds_at_first_figure']} server CPU-s")
    return result


if __name__ == "__main__":
    main()
