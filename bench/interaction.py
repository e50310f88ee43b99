"""Clicks on /attention in headless Chromium: time until the new figure is visible, and bytes per click.

For the bundled model and a random bert-base-size model (12 layers × 12 heads, hidden 768), at
12, 128 and 512 tokens: open ``/attention`` with the text (warm cache after the first load),
then click the real widgets, as a learner does:

- head change: open the *Head* select box, click the next head;
- layer change: open the *Layer* select box, click the next layer;
- view change: click *one layer* in the *View* control, then *one head* again.

Time runs, in the page's own clock, from the pointer going down on the option (``pointerdown``)
until the figure whose title names the new choice is in the page and two frames have painted.
The driver's own work before the click (Playwright checks over two frames that the option stands
still) is not what a user waits for; it is reported apart as ``median_driver_seconds`` (the same
interval timed by the driver, from before its click call). Per click it also reports what load does not distort: the
server's CPU-seconds (its process's user + system time from the click until the app is idle
again), the browser's main-thread long tasks (≥ 50 ms; mostly Plotly drawing) in that time, and
the bytes of the websocket messages the browser received: as the app's messages (``kb``) and as
they cross the wire with permessage-deflate, the server's ``enableWebsocketCompression``
(``wire_kb``: each message deflated in turn with a shared window, as the server's compressor
does), and what the server's TCP sockets actually sent (``socket_kb``, from ``ss``'s ``bytes_sent``).
Before every click the benchmark waits until the browser's main thread has been free of
long tasks for a moment (a select box clicked during a long Plotly draw can lose its click);
a select box whose list did not open gets an ArrowDown, as a keyboard user would. Each click is
repeated ``REPEATS`` times; the median is reported. Run with ``python -m bench interaction``; it
starts its own server (localhost only).
"""

from __future__ import annotations

import re
import statistics
import subprocess
import tempfile
import time
import zlib
from pathlib import Path
from urllib.parse import urlsplit

from bench import cpu_seconds
from ui.idle import IDLE_SECONDS

LENGTHS = (12, 128, 512)
# A subset for a quick look: BENCH_LENGTHS=12,128 and/or BENCH_MODELS=bundled (or bert-base); default: both.
# BENCH_MODELS=smollm2 measures the bundled language model (30 layers × 9 heads) too.
BUNDLED_LM = "SmolLM2-135M-Instruct"
REPEATS = 3
OPEN_TIMEOUT_MS = 600_000
CLICK_TIMEOUT_MS = 120_000
SENTENCE = "I will hike along the bank of a river and then open a new account at my bank in the town . "
VISIBLE = """(title) => {
    const shown = [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot .gtitle')]
        .some(t => t.textContent.includes(title));
    if (!shown) return false;
    return new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now()))));
}"""
# The page's clock at the next pointerdown anywhere in the page (the click the user makes).
CLICK_CLOCK = """() => {
    window.__pointerDownAt = null;
    document.addEventListener('pointerdown', () => { window.__pointerDownAt = performance.now(); },
                              {capture: true, once: true});
}"""


def text_of_tokens(tokenizer, n: int) -> str:
    """A text that ``tokenizer`` reads as exactly ``n`` tokens, special tokens included (``n`` ≤ its limit)."""
    long = SENTENCE * (n // 8 + 2)
    encoded = tokenizer(long, add_special_tokens=False, return_offsets_mapping=True)
    specials = len(tokenizer("")["input_ids"])
    end = encoded["offset_mapping"][n - specials - 1][1]
    text = long[:end]
    assert len(tokenizer(text)["input_ids"]) == n, (n, len(tokenizer(text)["input_ids"]))
    return text


LONG_TASKS = """() => {
    if (window.__longTasks) return;
    window.__longTasks = [];
    new PerformanceObserver(list => { for (const e of list.getEntries()) window.__longTasks.push([e.startTime, e.duration]); })
        .observe({type: "longtask", buffered: true});
}"""
QUIET = """(quietMs) => {
    const now = performance.now();
    const last = Math.max(0, ...window.__longTasks.map(([start, duration]) => start + duration));
    return now - last >= quietMs;
}"""
BUSY_SINCE = "(since) => window.__longTasks.filter(([start]) => start >= since).reduce((sum, [, d]) => sum + d, 0) / 1000"
QUIET_MS = 400
_background_done: list[bool] = []  # the server's one-time background work (UMAP's compilation) has finished


class _Bytes:
    """Bytes of every websocket message the page received since ``reset``: as sent by the app, and deflated
    as permessage-deflate sends them (one compressor per connection, its window shared across messages)."""

    def __init__(self, page):
        self.total = self.wire = 0
        page.on("websocket", self._watch)

    def _watch(self, ws) -> None:
        deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -12, 5)  # uvicorn: window 2**12, memLevel 5

        def add(payload) -> None:
            data = payload.encode("utf-8") if isinstance(payload, str) else payload
            self.total += len(data)
            self.wire += len(deflate.compress(data) + deflate.flush(zlib.Z_SYNC_FLUSH)) - 4  # RFC 7692 drops the tail

        ws.on("framereceived", add)

    def reset(self) -> None:
        self.total = self.wire = 0


def _wait_server_quiet(pid: int, *, window_s: float = 3.0, most: float = 0.06, timeout_s: float = 300.0) -> None:
    """Until the server used at most ``most`` of a core over ``window_s`` (UMAP's numba warm-up, started with the
    server, compiles in the background for a while), so a click's CPU-seconds are the click's own."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(window_s)
        if cpu_seconds(pid) - before <= most * window_s:
            return


def _wait_visible(page, title: str) -> float:
    """Until a figure titled ``title`` shows; returns the page's clock (ms) two frames after it did."""
    return page.wait_for_function(VISIBLE, arg=title, timeout=CLICK_TIMEOUT_MS, polling="raf").json_value()


def _timed_click(page, target, title: str) -> tuple[float, float]:
    """Click ``target``; seconds until a figure titled ``title`` shows: from the pointer going down on it (the
    page's clock), and from before the driver's click call."""
    page.evaluate(CLICK_CLOCK)
    started = time.perf_counter()
    target.click()
    shown_at = _wait_visible(page, title)
    driver_seconds = time.perf_counter() - started
    return (shown_at - page.evaluate("window.__pointerDownAt")) / 1000, driver_seconds


def _wait_quiet(page) -> None:
    """Until the main thread has had no long task for ``QUIET_MS`` (Plotly still drawing the last figure)."""
    page.evaluate(LONG_TASKS)
    page.wait_for_function(QUIET, arg=QUIET_MS, timeout=CLICK_TIMEOUT_MS, polling=100)


def _open_list(page, label: str, option: str):
    """Open the select box ``label`` until ``option`` is offered; returns the option."""
    box = page.locator('[data-testid="stMain"]').get_by_role("combobox", name=label, exact=True)
    choice = page.get_by_role("option", name=option, exact=True)
    for _ in range(3):
        _wait_quiet(page)
        box.click()
        if box.get_attribute("aria-expanded") != "true":  # a click can focus the box without opening its list
            box.press("ArrowDown")
        try:
            choice.wait_for(timeout=10_000)
            return choice
        except Exception:  # noqa: BLE001 - the list closed again: close it for sure, then retry
            page.keyboard.press("Escape")
    choice.wait_for(timeout=CLICK_TIMEOUT_MS)
    return choice


def _select(page, label: str, option: str, title: str) -> tuple[float, float]:
    """Open the select box ``label``, click ``option``; seconds until a figure titled ``title`` shows."""
    return _timed_click(page, _open_list(page, label, option), title)


def _segment(page, option: str, title: str) -> tuple[float, float]:
    button = page.locator('[data-testid="stMain"] [data-testid="stButtonGroup"]').get_by_role("radio", name=option, exact=True)
    _wait_quiet(page)
    return _timed_click(page, button, title)


def _socket_bytes_sent(port: int) -> int:
    """Bytes the server's TCP sockets on ``port`` have sent so far (``ss``'s ``bytes_sent``: what crossed the wire,
    compressed frames and headers included)."""
    out = subprocess.run(["ss", "-tinH", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True, check=True).stdout
    return sum(int(n) for n in re.findall(r"bytes_sent:(\d+)", out))


def _measure(tab, received: _Bytes, server_pid: int, click) -> dict:
    """One click: seconds to visible, server CPU-seconds, browser long-task seconds, bytes received (app, wire,
    and measured on the server's sockets)."""
    _wait_quiet(tab.page)
    received.reset()
    port = urlsplit(tab.page.url).port
    sent = _socket_bytes_sent(port)
    cpu = cpu_seconds(server_pid)
    since = tab.page.evaluate("performance.now()")
    seconds, driver_seconds = click()
    tab.wait_until_idle(timeout_ms=CLICK_TIMEOUT_MS, settle_ms=500)
    _wait_quiet(tab.page)  # the server is idle in these waits: they add nothing to its CPU-seconds
    return {"seconds": seconds, "driver_seconds": driver_seconds, "server_cpu": cpu_seconds(server_pid) - cpu,
            "browser_busy": tab.page.evaluate(BUSY_SINCE, since), "bytes": received.total, "wire": received.wire,
            "socket": _socket_bytes_sent(port) - sent}


def _one_setting(browser, url: str, server_pid: int, model_name: str, model_label: str, text: str, layers: int,
                 heads: int) -> dict:
    from tests.browser.conftest import AppPage

    tab = AppPage(browser, url)
    received = _Bytes(tab.page)
    try:
        started = time.perf_counter()
        tab.open("attention", {"model": model_name, "text": text, "layer": "0", "head": "0"}, timeout_ms=OPEN_TIMEOUT_MS)
        page = tab.page
        _wait_visible(page, f"{model_label} · layer 0, head 0")
        opened = time.perf_counter() - started
        # Once per server: UMAP's compilation (~10 CPU-s) starts after IDLE_SECONDS without a page or fragment run;
        # a quiet window longer than that has seen it start and end, so the clicks measure the clicks alone.
        _wait_server_quiet(server_pid, window_s=3.0 if _background_done else IDLE_SECONDS + 3)
        _background_done.append(True)
        samples: dict[str, list[dict]] = {"head change": [], "layer change": [], "view change": []}
        layer = head = 0
        for _ in range(REPEATS):
            head = (head + 1) % heads
            samples["head change"].append(_measure(tab, received, server_pid, lambda: _timed_click(  # the head switch
                page, page.locator('[data-testid="stMain"]').get_by_role("radio", name=f"Head {head}", exact=True),
                f"{model_label} · layer {layer}, head {head}")))
            layer = (layer + 1) % layers
            samples["layer change"].append(_measure(tab, received, server_pid, lambda: _select(
                page, "Layer (counted from 0)", str(layer), f"{model_label} · layer {layer}, head {head}")))
            samples["view change"].append(_measure(tab, received, server_pid, lambda: _segment(
                page, "one layer", f"{model_label} · layer {layer}, every head")))
            samples["view change"].append(_measure(tab, received, server_pid, lambda: _segment(
                page, "one head", f"{model_label} · layer {layer}, head {head}")))
        errors = tab.error_texts() + [f"request to another host: {u}" for u in tab.blocked]
    finally:
        tab.close()
    result = {"first_open_seconds": round(opened, 2), "errors": errors}
    for action, values in samples.items():
        result[action] = {
            "median_seconds": round(statistics.median(v["seconds"] for v in values), 3),
            "max_seconds": round(max(v["seconds"] for v in values), 3),
            "median_driver_seconds": round(statistics.median(v["driver_seconds"] for v in values), 3),
            "median_server_cpu_seconds": round(statistics.median(v["server_cpu"] for v in values), 3),
            "median_browser_busy_seconds": round(statistics.median(v["browser_busy"] for v in values), 3),
            "median_kb": round(statistics.median(v["bytes"] for v in values) / 1024, 1),
            "median_wire_kb": round(statistics.median(v["wire"] for v in values) / 1024, 1),
            "median_socket_kb": round(statistics.median(v["socket"] for v in values) / 1024, 1),
        }
    return result


def main() -> dict:
    import os
    import shutil

    if shutil.which("ss") is None:
        raise SystemExit("bench interaction reads what the server's sockets sent with `ss`: apt-get install iproute2")
    from playwright.sync_api import sync_playwright
    from transformers import AutoTokenizer

    from core.model.models import DEFAULT_MODEL, load_model
    from tests.browser.conftest import CHROMIUM, CHROMIUM_FLAGS, serve_app
    from tests.model_factory import build_bert_base_size

    lengths = [int(n) for n in os.environ.get("BENCH_LENGTHS", ",".join(map(str, LENGTHS))).split(",")]
    wanted = os.environ.get("BENCH_MODELS", "bundled,bert-base").split(",")
    results: dict = {"repeats": REPEATS, "load_average_before": [round(x, 2) for x in os.getloadavg()], "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        bert_base = str(build_bert_base_size(Path(tmp) / "bert-base-size"))
        bundled = load_model(None)
        lm = load_model(BUNDLED_LM) if "smollm2" in wanted else None
        models = [
            (DEFAULT_MODEL, bundled.name, bundled.tokenizer, bundled.num_layers, bundled.num_heads),
            (bert_base, bert_base, AutoTokenizer.from_pretrained(bert_base), 12, 12),
        ] + ([(BUNDLED_LM, lm.name, lm.tokenizer, lm.num_layers, lm.num_heads)] if lm is not None else [])
        del bundled, lm
        with serve_app(Path(tmp) / "server.log") as (url, server), sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
            for model_name, label, tokenizer, layers, heads in models:
                short = {DEFAULT_MODEL: "bundled", BUNDLED_LM: "smollm2"}.get(model_name, "bert-base")
                key = {"bundled": "bundled (all-MiniLM-L6-v2)", "smollm2": f"bundled language model ({BUNDLED_LM})",
                       "bert-base": "random bert-base size"}[short]
                if short not in wanted:
                    continue
                results["models"][key] = {}
                for n in lengths:
                    row = _one_setting(browser, url, server.pid, model_name, label, text_of_tokens(tokenizer, n), layers, heads)
                    results["models"][key][n] = row
                    print(f"{key}, {n} tokens (first open {row['first_open_seconds']} s):", flush=True)
                    for action in ("head change", "layer change", "view change"):
                        m = row[action]
                        print(f"  {action:<13} {m['median_seconds']:6.2f} s (max {m['max_seconds']:.2f};"
                              f" driver {m['median_driver_seconds']:.2f} s)"
                              f"  server {m['median_server_cpu_seconds']:.3f} CPU-s  browser busy {m['median_browser_busy_seconds']:.2f} s"
                              f"  {m['median_kb']:8.1f} KB (deflated {m['median_wire_kb']:.1f} KB; "
                              f"sockets sent {m['median_socket_kb']:.1f} KB)", flush=True)
                    if row["errors"]:
                        print(f"  errors: {row['errors']}", flush=True)
            browser.close()
    return results


if __name__ == "__main__":
    main()
