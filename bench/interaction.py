"""Clicks on /attention in headless Chromium: time until the new figure is visible, and bytes per click.

For the bundled model and a random bert-base-size model (12 layers × 12 heads, hidden 768), at
12, 128 and 512 tokens: open ``/attention`` with the text (warm cache after the first load),
then click the real widgets, as a learner does:

- head change: open the *Head* select box, click the next head;
- layer change: open the *Layer* select box, click the next layer;
- view change: click *one layer* in the *View* control, then *one head* again.

Time runs from the option click until the figure whose title names the new choice is in the
page and two frames have painted; bytes are the websocket frames the browser received from
that click until the app was idle again. Each click is repeated ``REPEATS`` times; the median
is reported. Run with ``python -m bench interaction``; it starts its own server (localhost only).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

LENGTHS = (12, 128, 512)
REPEATS = 3
OPEN_TIMEOUT_MS = 600_000
CLICK_TIMEOUT_MS = 120_000
SENTENCE = "I will hike along the bank of a river and then open a new account at my bank in the town . "
VISIBLE = """(title) => {
    const shown = [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot .gtitle')]
        .some(t => t.textContent.includes(title));
    if (!shown) return false;
    return new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(true))));
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


class _Bytes:
    """Bytes of every websocket frame the page received since ``reset``."""

    def __init__(self, page):
        self.total = 0
        page.on("websocket", lambda ws: ws.on("framereceived", self._add))

    def _add(self, payload) -> None:
        self.total += len(payload)

    def reset(self) -> None:
        self.total = 0


def _wait_visible(page, title: str) -> None:
    page.wait_for_function(VISIBLE, arg=title, timeout=CLICK_TIMEOUT_MS, polling="raf")


def _select(page, label: str, option: str, title: str) -> float:
    """Open the select box ``label``, click ``option``; seconds until a figure titled ``title`` shows."""
    page.get_by_test_id("stSelectbox").filter(has_text=label).click()
    choice = page.get_by_role("option", name=option, exact=True)
    choice.wait_for(timeout=CLICK_TIMEOUT_MS)
    started = time.perf_counter()
    choice.click()
    _wait_visible(page, title)
    return time.perf_counter() - started


def _segment(page, option: str, title: str) -> float:
    button = page.locator('[data-testid="stMain"] [data-testid="stButtonGroup"]').get_by_role("radio", name=option, exact=True)
    started = time.perf_counter()
    button.click()
    _wait_visible(page, title)
    return time.perf_counter() - started


def _measure(tab, received: _Bytes, click) -> tuple[float, int]:
    received.reset()
    seconds = click()
    tab.wait_until_idle(timeout_ms=CLICK_TIMEOUT_MS, settle_ms=500)
    return seconds, received.total


def _one_setting(browser, url: str, model_name: str, model_label: str, text: str, layers: int, heads: int) -> dict:
    from tests.browser.conftest import AppPage

    tab = AppPage(browser, url)
    received = _Bytes(tab.page)
    try:
        started = time.perf_counter()
        tab.open("attention", {"model": model_name, "text": text, "layer": "0", "head": "0"}, timeout_ms=OPEN_TIMEOUT_MS)
        page = tab.page
        _wait_visible(page, f"{model_label} · layer 0, head 0")
        opened = time.perf_counter() - started
        samples: dict[str, list[tuple[float, int]]] = {"head change": [], "layer change": [], "view change": []}
        layer = head = 0
        for _ in range(REPEATS):
            head = (head + 1) % heads
            samples["head change"].append(_measure(tab, received, lambda: _select(
                page, "Head (counted from 0)", str(head), f"{model_label} · layer {layer}, head {head}")))
            layer = (layer + 1) % layers
            samples["layer change"].append(_measure(tab, received, lambda: _select(
                page, "Layer (counted from 0)", str(layer), f"{model_label} · layer {layer}, head {head}")))
            samples["view change"].append(_measure(tab, received, lambda: _segment(
                page, "one layer", f"{model_label} · layer {layer}, every head")))
            samples["view change"].append(_measure(tab, received, lambda: _segment(
                page, "one head", f"{model_label} · layer {layer}, head {head}")))
        errors = tab.error_texts() + [f"request to another host: {u}" for u in tab.blocked]
    finally:
        tab.close()
    result = {"first_open_seconds": round(opened, 2), "errors": errors}
    for action, values in samples.items():
        result[action] = {
            "median_seconds": round(statistics.median(s for s, _ in values), 3),
            "max_seconds": round(max(s for s, _ in values), 3),
            "median_kb": round(statistics.median(b for _, b in values) / 1024, 1),
        }
    return result


def main() -> dict:
    import os

    from playwright.sync_api import sync_playwright
    from transformers import AutoTokenizer

    from core.models import DEFAULT_MODEL, load_model
    from tests.browser.conftest import CHROMIUM, CHROMIUM_FLAGS, serve_app
    from tests.model_factory import build_bert_base_size

    results: dict = {"repeats": REPEATS, "load_average_before": [round(x, 2) for x in os.getloadavg()], "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        bert_base = str(build_bert_base_size(Path(tmp) / "bert-base-size"))
        bundled = load_model(None)
        models = [
            (DEFAULT_MODEL, bundled.name, bundled.tokenizer, bundled.num_layers, bundled.num_heads),
            (bert_base, bert_base, AutoTokenizer.from_pretrained(bert_base), 12, 12),
        ]
        del bundled
        with serve_app(Path(tmp) / "server.log") as (url, _proc), sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
            for model_name, label, tokenizer, layers, heads in models:
                key = "bundled (all-MiniLM-L6-v2)" if model_name == DEFAULT_MODEL else "random bert-base size"
                results["models"][key] = {}
                for n in LENGTHS:
                    row = _one_setting(browser, url, model_name, label, text_of_tokens(tokenizer, n), layers, heads)
                    results["models"][key][n] = row
                    print(f"{key}, {n} tokens (first open {row['first_open_seconds']} s):", flush=True)
                    for action in ("head change", "layer change", "view change"):
                        m = row[action]
                        print(f"  {action:<13} {m['median_seconds']:6.2f} s (max {m['max_seconds']:.2f})  {m['median_kb']:8.1f} KB",
                              flush=True)
                    if row["errors"]:
                        print(f"  errors: {row['errors']}", flush=True)
            browser.close()
    return results


if __name__ == "__main__":
    main()
