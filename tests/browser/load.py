"""Many browser sessions at once against one server: used by the load test and ``bench/load.py``.

Each session opens the home page with its own text, which contains a word no other
session uses, and waits until the home figure's token axis shows that word. Afterwards
it checks that no other session's word reached its page (no cross-session leakage).
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlencode, urlparse

import psutil

# Single WordPiece tokens in the bundled model's vocabulary, one per session.
SESSION_WORDS = [
    "apple", "river", "guitar", "planet", "pencil", "tiger", "castle", "rocket", "violin", "garden",
    "bridge", "mirror", "candle", "forest", "window", "dragon", "island", "ladder", "saddle", "kettle",
    "lemon", "camera", "wallet", "helmet", "piano",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}


@dataclass
class SessionResult:
    word: str
    seconds: float
    own_word_shown: bool
    foreign_words: list[str]
    blocked: list[str]
    errors: list[str]


def session_text(word: str) -> str:
    return f"The {word} was left beside the old wooden door."


async def _one_session(browser, base_url: str, word: str, timeout_ms: int) -> SessionResult:
    blocked: list[str] = []
    errors: list[str] = []
    context = await browser.new_context()

    async def route(r):
        host = urlparse(r.request.url).hostname or ""
        if host in LOCAL_HOSTS or r.request.url.startswith(("data:", "blob:", "about:")):
            await r.continue_()
        else:
            blocked.append(r.request.url)
            await r.abort()

    await context.route("**/*", route)
    page = await context.new_page()
    page.set_default_timeout(timeout_ms)
    page.on("pageerror", lambda err: errors.append(str(err)))
    started = time.perf_counter()
    own = True
    try:
        await page.goto(f"{base_url}/?{urlencode({'text': session_text(word)})}", wait_until="domcontentloaded")
        await page.wait_for_function(
            "(w) => [...document.querySelectorAll('.js-plotly-plot .xtick text')].some(t => t.textContent === w)",
            arg=word,
            timeout=timeout_ms,
        )
    except Exception as err:  # noqa: BLE001 - a timeout is a result to report, not a crash
        own = False
        errors.append(f"{type(err).__name__}: {str(err)[:200]}")
    seconds = time.perf_counter() - started
    labels = await page.eval_on_selector_all(".js-plotly-plot .xtick text", "ts => ts.map(t => t.textContent)")
    errors += await page.eval_on_selector_all('[data-testid="stException"], [data-testid="stAlertContentError"]', "es => es.map(e => e.innerText)")
    await context.close()
    foreign = sorted({w for w in SESSION_WORDS if w != word and w in labels})
    return SessionResult(word, seconds, own, foreign, blocked, errors)


class PeakRSS:
    """Samples the resident memory of a process and its children until stopped."""

    def __init__(self, pid: int, interval: float = 0.1):
        self.process = psutil.Process(pid)
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                procs = [self.process] + self.process.children(recursive=True)
                self.peak = max(self.peak, sum(p.memory_info().rss for p in procs))
            except psutil.Error:
                pass
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


async def _run_sessions(base_url: str, words: list[str], executable: str, args: list[str], timeout_ms: int):
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=executable, args=args, headless=True)
        try:
            return await asyncio.gather(*(_one_session(browser, base_url, w, timeout_ms) for w in words))
        finally:
            await browser.close()


def run_load(base_url: str, sessions: int, *, executable: str, args: list[str], timeout_ms: int = 300_000) -> list[SessionResult]:
    """Open ``sessions`` browser sessions at once, each with its own text; return their results."""
    if sessions > len(SESSION_WORDS):
        raise ValueError(f"at most {len(SESSION_WORDS)} sessions")
    # A thread of its own: the caller may already run an event loop (Playwright's sync API does).
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(
            asyncio.run, _run_sessions(base_url, SESSION_WORDS[:sessions], executable, args, timeout_ms)
        ).result()


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0–100) by linear interpolation."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[max(0, min(98, round(q) - 1))]
