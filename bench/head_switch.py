"""The Attention page's head switch (ui/head_switch.py) in headless Chromium: click on "Head n" → the new head drawn
(the page's clock, from the pointer going down to the first animation frame after the switch's title names the head),
median of ``CLICKS``; the bytes of the message carrying the layer to the browser (the component's element), and the
bytes the page receives per head click and per layer change (the Layer select box; time until the switch shows the
new layer, in the page's clock from the option's pointerdown to the first frame in which the switch's title names
it, and by the driver from opening the select box). On the bundled MiniLM at ~110 and ~420 words. Run with
``python -m bench head_switch``; it starts its own server (localhost only)."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

CLICKS = 10
WORDS = (110, 420)
SENTENCE = "I will hike along the bank of a river and then open a new account at my bank in the town . "
SHADOW_TITLE = """() => [...document.querySelectorAll('[data-testid="stMain"] *')].map(e => e.shadowRoot).filter(Boolean)
    .map(r => r.querySelector('.head-switch .title')).find(Boolean)"""
# pointerdown time, then the first frame after the title names the head
ARM = """() => {
    window.__down = null; window.__painted = null;
    document.addEventListener('pointerdown', () => { window.__down = performance.now(); }, {capture: true, once: true});
    const title = (TITLE_FN)();
    const observer = new MutationObserver(() => {
        observer.disconnect();
        requestAnimationFrame(() => { window.__painted = performance.now(); });
    });
    observer.observe(title, {childList: true, characterData: true, subtree: true});
}""".replace("TITLE_FN", SHADOW_TITLE)
# another layer: pointerdown on the Layer list's option, then the first frame in which the switch's title names it
ARM_LAYER = """(text) => {
    window.__layerDown = null; window.__layerPainted = null;
    document.addEventListener('pointerdown', () => { window.__layerDown = performance.now(); }, {capture: true, once: true});
    const poll = () => { const t = (TITLE_FN)();
        if (window.__layerDown !== null && t && t.textContent === text) window.__layerPainted = performance.now();
        else requestAnimationFrame(poll); };
    requestAnimationFrame(poll);
}""".replace("TITLE_FN", SHADOW_TITLE)
# the switch's own marks (ui/head_switch.js) after the layer's pointerdown, in ms from it
MARKS = """() => performance.getEntriesByType('mark').filter(m => m.name.startsWith('head-switch:')
    && m.startTime >= window.__layerDown).map(m => [m.name, Math.round(m.startTime - window.__layerDown)])"""
TITLE_IS = """(text) => { const t = (TITLE_FN)(); return t && t.textContent === text; }""".replace("TITLE_FN", SHADOW_TITLE)


class Frames:
    """The websocket messages the page receives, as (bytes, element type of a new element or None)."""

    def __init__(self, page):
        self.frames: list[tuple[int, str | None]] = []
        page.on("websocket", lambda ws: ws.on("framereceived", self.add))

    def add(self, payload) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        if not isinstance(payload, bytes):
            return
        msg = ForwardMsg()
        msg.ParseFromString(payload)
        kind = None
        if msg.WhichOneof("type") == "delta" and msg.delta.WhichOneof("type") == "new_element":
            kind = msg.delta.new_element.WhichOneof("type")
            if kind == "bidi_component" and msg.delta.new_element.bidi_component.component_name.endswith("head_switch"):
                kind = "head_switch"
        self.frames.append((len(payload), kind))

    def since(self, start: int) -> tuple[int, int]:
        """(all bytes, the head switch's element bytes) received after frame ``start``."""
        new = self.frames[start:]
        return sum(b for b, _ in new), sum(b for b, k in new if k == "head_switch")

    def switch_messages(self, start: int) -> list[int]:
        """The bytes of each message carrying the head switch's element after frame ``start`` (after another layer:
        the shown head alone, then the whole layer)."""
        return [b for b, k in self.frames[start:] if k == "head_switch"]


def words_text(words: int) -> str:
    return " ".join((SENTENCE * (words // 10 + 2)).split()[:words])


def one_text(browser, url: str, query: dict, heads: int, layer: int = 0) -> dict:
    from tests.browser.conftest import AppPage

    tab = AppPage(browser, url)
    tab.patience_ms = 900_000
    frames = Frames(tab.page)
    try:
        page = tab.open("attention", {**query, "layer": str(layer), "head": "0"}, timeout_ms=900_000)
        started = time.perf_counter()
        page.wait_for_function(TITLE_IS, arg=f"Layer {layer}, head 0", timeout=900_000)
        switch_after = time.perf_counter() - started
        tab.wait_until_idle()
        opened = frames.since(0)
        tokens = page.evaluate("""() => [...document.querySelectorAll('[data-testid="stMain"] *')].map(e => e.shadowRoot)
            .filter(Boolean).map(r => r.querySelector('[role="img"]')).find(Boolean).dataset.n""")
        memory = page.evaluate("() => performance.memory ? performance.memory.usedJSHeapSize : null")
        seconds, received = [], []
        head = 0
        for _ in range(CLICKS):
            head = (head % (heads - 1)) + 1 if head != heads - 1 else 1
            page.evaluate(ARM)
            start = len(frames.frames)
            page.get_by_role("radio", name=f"Head {head}", exact=True).click()
            page.wait_for_function("() => window.__painted !== null", timeout=60_000)
            seconds.append((page.evaluate("window.__painted") - page.evaluate("window.__down")) / 1000)
            tab.wait_until_idle()
            received.append(frames.since(start))
        # another layer: the Layer select box, then the switch's title names it
        start, started = len(frames.frames), time.perf_counter()
        box = page.locator('[data-testid="stMain"]').get_by_role("combobox", name="Layer (counted from 0)", exact=True)
        box.click()
        box.press_sequentially(str(layer + 1))  # the list is virtualised (30 layers): typing filters it
        page.evaluate(ARM_LAYER, f"Layer {layer + 1}, head {head}")
        page.get_by_role("option", name=str(layer + 1), exact=True).click()
        page.wait_for_function("() => window.__layerPainted !== null", timeout=900_000)
        layer_seconds = time.perf_counter() - started
        layer_ms = page.evaluate("window.__layerPainted - window.__layerDown")
        marks = page.evaluate(MARKS)
        tab.wait_until_idle()
        layer_bytes = frames.since(start)
        layer_messages = frames.switch_messages(start)
        errors = tab.error_texts() + [f"request to another host: {u}" for u in tab.blocked]
    finally:
        tab.close()
    return {"tokens": int(tokens), "switch_shown_after_load_s": round(switch_after, 1),
            "js_heap_mb": None if memory is None else round(memory / 2**20, 1),
            "click_to_drawn_ms": {"median": round(statistics.median(seconds) * 1000, 1), "max": round(max(seconds) * 1000, 1)},
            "open_kb": round(opened[0] / 1024, 1), "layer_element_kb": round(opened[1] / 1024, 1),
            "per_click_kb": round(statistics.median(r[0] for r in received) / 1024, 1),
            "per_click_element_kb": round(statistics.median(r[1] for r in received) / 1024, 1),
            "layer_change_seconds_driver": round(layer_seconds, 3), "layer_change_ms": round(layer_ms, 1),
            "layer_change_marks": marks, "layer_change_kb": round(layer_bytes[0] / 1024, 1),
            "layer_switch_messages_kb": [round(b / 1024, 1) for b in layer_messages],
            "errors": errors}


def main() -> dict:
    import os

    from playwright.sync_api import sync_playwright

    from bench.interaction import BUNDLED_LM, text_of_tokens
    from core.model.models import load_model
    from tests.browser.conftest import CHROMIUM, CHROMIUM_FLAGS, serve_app

    heads = load_model(None).num_heads
    results: dict = {"clicks": CLICKS, "load_average_before": [round(x, 2) for x in os.getloadavg()], "texts": {}}
    with tempfile.TemporaryDirectory() as tmp, serve_app(Path(tmp) / "server.log") as (url, _server), \
            sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        settings = [(f"{w} words", {"text": words_text(w)}, heads, 0) for w in WORDS] if os.environ.get(
            "BENCH_SHORT", "1") == "1" else []
        if os.environ.get("BENCH_LONG", "1") == "1":  # the bundled language model on 4,096 tokens: the pooled heads
            lm = load_model(BUNDLED_LM)
            settings.append((f"{BUNDLED_LM}, 4,096 tokens", {"model": BUNDLED_LM, "text": text_of_tokens(lm.tokenizer, 4096)},
                             lm.num_heads, 15))
            del lm
        for name, query, count, layer in settings:
            row = one_text(browser, url, query, count, layer)
            results["texts"][name] = row
            words = name
            print(f"{words} ({row['tokens']} tokens; switch shown {row['switch_shown_after_load_s']} s after load; "
                  f"JS heap {row['js_heap_mb']} MB): click → drawn {row['click_to_drawn_ms']} ms; layer sent "
                  f"{row['layer_element_kb']} KB (page opened {row['open_kb']} KB); per head click {row['per_click_kb']} KB "
                  f"(switch element {row['per_click_element_kb']} KB); another layer: option pressed → drawn "
                  f"{row['layer_change_ms']} ms ({row['layer_change_marks']}), {row['layer_change_seconds_driver']} s "
                  f"from opening the select box (driver), {row['layer_change_kb']} KB (the switch's messages "
                  f"{row['layer_switch_messages_kb']} KB); errors {row['errors']}", flush=True)
        browser.close()
    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return results


if __name__ == "__main__":
    main()
