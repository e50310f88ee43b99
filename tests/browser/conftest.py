"""Real-browser tier: the app served on localhost, driven by Playwright in Debian's Chromium.

Every request that is not to localhost is blocked and recorded; the tests assert
there were none. In CI (``CI`` set) a missing Chromium fails the run instead of skipping.

Blocking is Chromium's own: every request goes to a proxy that is not there (``--proxy-server``), except those to the
loopback addresses (``--proxy-bypass-list``), so it fails before it leaves the machine; each tab records the URL of
every request to another host from Playwright's request events. Playwright's ``route`` would do both, but routing
turns off the browser's HTTP cache and sends every request through the test process, which made each page load cost
about 0.7 CPU-seconds more in Chromium alone (Streamlit's scripts fetched and compiled again on every load).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CLOSED_PORT = 9  # the discard service's port, which nothing here listens on
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    # Nothing but the app: a request to any other host goes to a proxy on a closed port and fails (see above).
    f"--proxy-server=http://127.0.0.1:{CLOSED_PORT}",
    "--proxy-bypass-list=127.0.0.1;localhost;[::1]",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}
# The entry point `make run`, the replicas and the container start: app.py behind st.App, whose middleware tells the
# frontend where the server is (without it, every deep link such as /attention first probes /attention/_stcore/health
# and /attention/_stcore/host-config, two 404s in the console; serve.BaseUrlMiddleware).
ENTRY = "serve.py"


def title_words(words: str) -> re.Pattern:
    """A pattern for ``words`` in a figure title (``.gtitle``'s text) wherever Plotly wrapped it.

    Plotly draws a wrapped title's lines as tspans and an element's text joins them with no space ("layer 1,<br>head
    1" reads "layer 1,head 1"); where a title wraps depends on its width and on the model folder's path in it, which
    varies from run to run. So any space between two words may be missing (scripts in the page compare titles with
    whitespace removed); a last word that is a number is not the start of a longer one ("head 1" is not "head 12")."""
    pattern = r"\s*".join(re.escape(word) for word in words.split())
    return re.compile(pattern + (r"(?!\d)" if words.split()[-1].isdigit() else ""))


def _require_browser() -> None:
    missing = []
    if not Path(CHROMIUM).exists():
        missing.append(f"Chromium at {CHROMIUM}")
    try:
        import playwright  # noqa: F401 - only to see whether it is installed
    except ImportError:
        missing.append("the playwright package")
    if missing:
        reason = "real-browser tests need " + " and ".join(missing) + " (make test installs them as root)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve_app(
    log_path: Path, extra_env: dict[str, str] | None = None, script: str = ENTRY
) -> Iterator[tuple[str, subprocess.Popen]]:
    """``streamlit run serve.py`` (or ``script``) on a free localhost port with the hub switched off; yields
    (url, process) once the server answers."""
    port = _free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", **(extra_env or {}))
    log = open(log_path, "w")  # noqa: SIM115 - the server writes to it for its whole life; closed when it stops
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / script), "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    pytest.fail("the app did not start: " + log_path.read_text()[-2000:])
                time.sleep(0.5)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="session")
def app_server(tmp_path_factory):
    """The app served once for the whole browser tier."""
    _require_browser()
    from bench.protocol import run_apart, view_page

    with serve_app(tmp_path_factory.mktemp("server") / "streamlit.log") as (url, _proc):
        # One view of the home page before any test, from a protocol-level client: the server's first view waits for
        # its imports and draws a hidden chart that loads Plotly early (ui.startup), which would otherwise be one more
        # chart on whichever page a test happened to open first.
        first = run_apart(view_page(url, "", {}, timeout=300))
        assert not first.errors, first.errors
        yield url


@pytest.fixture(scope="session")
def browser():
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        yield b
        b.close()


def drawn_count(page, text: str) -> int:
    """How many elements show ``text`` on the page, leaving out the figures' visually hidden text alternatives
    (``ui.figures``: a figure's title is also in the sentence a screen reader reads before it)."""
    return page.locator(f"text={text}").evaluate_all("els => els.filter(e => !e.closest('.figure-alt')).length")


# Resolves after two animation frames: style and layout changes made before the call have been computed and painted.
NEXT_FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"
# Every chart of the page has drawn its SVG.
EVERY_CHART_DRAWN = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stPlotlyChart"]')]
    .every(c => c.querySelector('.js-plotly-plot .main-svg'))"""
# Every chart drawn and every frame loaded (a frame the page cannot look into counts as loaded).
EVERY_FIGURE_DRAWN = f"""() => ({EVERY_CHART_DRAWN})()
  && [...document.querySelectorAll('[data-testid="stMain"] iframe')].every(f => {{
       try {{ return f.contentDocument !== null && f.contentDocument.readyState === 'complete'; }} catch (e) {{ return true; }}
     }})"""


# Counts the app's script runs in every document of a tab (an init script, so from before the app's first run):
# ``window.__runs.started`` grows when ``data-test-script-state`` becomes "running", ``finished`` when it leaves it.
# ``wait_until_idle`` compares ``finished`` with the count when it last returned, so it knows whether the run an action
# caused has been seen to end; ``test_navigation.settle`` watches ``started`` for an action's run. A batch of records
# can hold a whole run (running, then not): each record's new value is the next record's old one.
WATCH_RUNS_JS = """(() => {
    const runs = window.__runs = {started: 0, finished: 0, atIdle: 0};
    let last = null;
    new MutationObserver(records => {
        records.forEach((record, i) => {
            const next = records.slice(i + 1).find(r => r.target === record.target);
            const state = next ? next.oldValue : record.target.getAttribute('data-test-script-state');
            if (last !== 'running' && state === 'running') runs.started += 1;
            if (last === 'running' && state !== 'running') runs.finished += 1;
            last = state;
        });
    }).observe(document, {subtree: true, attributes: true, attributeOldValue: true,
                          attributeFilter: ['data-test-script-state']});
})()"""


class AppPage:
    """One browser tab on the app, recording blocked requests, console errors and dialogs."""

    opened: list[AppPage] = []  # every tab of the running test, for ``no_console_errors``

    def __init__(self, browser, base_url: str, *, device_scale_factor: float = 1):
        AppPage.opened.append(self)
        self.base_url = base_url
        self.blocked: list[str] = []
        self.console_errors: list[str] = []
        self.dialogs: list[str] = []
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True,
                                           device_scale_factor=device_scale_factor)
        self.context.add_init_script(WATCH_RUNS_JS)
        self.context.on("request", self._request)  # every page of the context, popups included
        self.page = self.context.new_page()
        self.page.on("websocket", lambda socket: self._record_if_foreign(socket.url))
        self.page.on("console", self._console)
        self.page.on("dialog", self._dialog)
        self.page.on("pageerror", lambda err: self.console_errors.append(f"pageerror: {err}"))
        self.failed_responses: list[str] = []  # every 4xx/5xx answer from the app, as "status url"
        self.page.on("response", self._response)
        self.patience_ms = 120_000  # the default wait for a page load or a rerun; tests on slow pages raise it

    def _request(self, request):
        self._record_if_foreign(request.url)

    def _record_if_foreign(self, url: str) -> None:
        """Record a request to another host (Chromium's proxy setting fails it, ``CHROMIUM_FLAGS``)."""
        if not url.startswith(("data:", "blob:", "about:")) and (urlparse(url).hostname or "") not in LOCAL_HOSTS:
            self.blocked.append(url)

    def _response(self, response):
        if response.status >= 400 and (urlparse(response.url).hostname or "") in LOCAL_HOSTS:
            self.failed_responses.append(f"{response.status} {response.url}")

    def _console(self, msg):
        if msg.type == "error":
            self.console_errors.append(msg.text)

    def _dialog(self, dialog):
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def open(self, path: str = "", query: dict[str, str] | None = None, *, timeout_ms: int | None = None):
        url = f"{self.base_url}/{path}" + (f"?{urlencode(query)}" if query else "")
        self.page.goto(url, wait_until="domcontentloaded", timeout=timeout_ms or self.patience_ms)
        self.wait_until_idle(timeout_ms=timeout_ms)
        return self.page

    def wait_until_idle(self, *, timeout_ms: int | None = None, settle_ms: int = 800, after_run_ms: int = 150,
                        require_sidebar: bool = True) -> None:
        """Wait until Streamlit has run the script, drawn every element, and stayed so for a while.

        A freshly loaded page reports "not running" before its first run starts, and an action's rerun starts a
        moment after the action, so one idle check is not enough: the idle state must hold, with the sidebar drawn
        (``require_sidebar``: the app's; a test script without one passes False). When a run has been seen to end
        since this method last returned (``WATCH_RUNS_JS``), holding for ``after_run_ms`` is enough (a run started by
        that one, such as the column probe's, has begun by then); otherwise it must hold for ``settle_ms``, time for
        an action's run to start.
        "Not running" only means every element has arrived: the frontend loads the code of
        most element types (metrics, widgets, charts) on first use and shows a skeleton
        (``stSkeleton``) until it has, which on a loaded machine takes seconds after the run.
        """
        timeout_ms = timeout_ms or self.patience_ms
        self.page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_ms)
        self.page.evaluate("window.__idleSince = undefined")
        self.page.wait_for_function(
            """([settle, afterRun, needSidebar]) => {
                const app = document.querySelector('[data-testid="stApp"]');
                const idle = app && app.getAttribute('data-test-script-state') === 'notRunning'
                    && (!needSidebar || document.querySelector('[data-testid="stSidebar"] textarea'))
                    && document.querySelector('[data-testid="stMain"]')
                    && !document.querySelector('[data-testid="stSkeleton"]');
                const now = performance.now();
                if (!idle) { window.__idleSince = undefined; return false; }
                if (window.__idleSince === undefined) { window.__idleSince = now; }
                const runs = window.__runs;
                const ran = runs !== undefined && runs.finished > runs.atIdle;
                if (now - window.__idleSince < (ran ? Math.min(afterRun, settle) : settle)) { return false; }
                if (runs !== undefined) { runs.atIdle = runs.finished; }
                return true;
            }""",
            arg=[settle_ms, after_run_ms, require_sidebar],
            timeout=timeout_ms,
            polling=50,
        )

    def wait_until_drawn(self, settle_ms: int = 250) -> None:
        """Wait until every chart of the page has drawn its SVG and every frame (BertViz, Plotly in HTML) has loaded,
        then ``settle_ms`` for what they run on load (an injected handler would fire by then)."""
        self.page.wait_for_function(EVERY_FIGURE_DRAWN, timeout=self.patience_ms, polling=100)
        self.page.wait_for_timeout(settle_ms)

    def forget(self) -> None:
        """Start a test afresh on a tab shared by a module's tests: what earlier tests saw is theirs."""
        for seen in (self.blocked, self.console_errors, self.dialogs, self.failed_responses):
            seen.clear()

    def error_texts(self) -> list[str]:
        locator = self.page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]')
        return [locator.nth(i).inner_text() for i in range(locator.count())]

    def unexplained_console_errors(self) -> list[str]:
        """Console errors and the app's 4xx/5xx answers: a failed request is an error even when the browser logs
        nothing for it."""
        return self.console_errors + [f"HTTP {r}" for r in self.failed_responses]

    def assert_clean(self) -> None:
        assert not self.error_texts(), self.error_texts()
        assert not self.blocked, f"requests to other hosts: {self.blocked}"
        assert not self.failed_responses, f"the app answered with an error: {self.failed_responses}"
        assert not self.unexplained_console_errors(), self.unexplained_console_errors()
        assert not self.dialogs, f"a dialog opened: {self.dialogs}"

    def close(self) -> None:
        self.context.close()


@pytest.fixture(scope="module")
def module_tab(browser, app_server):
    """One tab (one browser context) for a module's tests: its pages load from the context's cache, not afresh. A
    test calls ``forget()`` first and ``assert_clean()`` last."""
    tab = AppPage(browser, app_server)
    yield tab
    tab.close()


@pytest.fixture
def app_page(browser, app_server):
    tab = AppPage(browser, app_server)
    yield tab
    tab.close()


@pytest.fixture(autouse=True)
def no_console_errors():
    """Every browser test fails on a console error, or a 4xx/5xx answer from the app, in any tab it opened."""
    AppPage.opened.clear()
    yield
    errors = [e for tab in AppPage.opened for e in tab.unexplained_console_errors()]
    AppPage.opened.clear()
    assert not errors, f"console errors: {errors}"
