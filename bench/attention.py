"""Attention page at 128 and 512 tokens on a bert-base-size model (12 layers × 12 heads, random weights).

For each length: bytes sent to the browser (``len(fig.to_json())``) and time to paint
in headless Chromium (from the figure's JSON to its second painted frame, plotly.js already
loaded) for the overview mosaic, the one-layer grid and the large single head;
and the same for BertViz's model view of every layer as the baseline (built offline here,
since BertViz's own HTML paints nothing without its CDN). Run: ``python -m bench attention``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from core.attention_heads.attention import attention_view
from core.model.inference import analyze
from core.model.models import load_model
from tests.browser.conftest import NEXT_FRAMES
from tests.model_factory import build_bert_base_size
from viz import attention as va
from viz import bertviz_offline as bv

LENGTHS = (128, 512)
PAINT_TIMEOUT_MS = 120_000
CHROMIUM = "/usr/bin/chromium"
TEXT = "I will hike along the bank of a river and open a new account at my bank . " * 60


def _blocked(route) -> None:
    route.abort() if route.request.url.startswith("http") else route.continue_()


def _html_paint_seconds(browser, html: str, selector: str) -> float | None:
    """Seconds from handing ``html`` to a fresh tab until ``selector`` exists and two frames have painted."""
    page = browser.new_page()
    page.route("**/*", _blocked)
    try:
        started = time.perf_counter()
        page.set_content(html, wait_until="commit", timeout=PAINT_TIMEOUT_MS)
        page.wait_for_selector(selector, state="attached", timeout=PAINT_TIMEOUT_MS)
        page.evaluate(NEXT_FRAMES)
        return time.perf_counter() - started
    except Exception:  # noqa: BLE001 - a timeout or a crashed tab both mean "did not paint"
        return None
    finally:
        page.close()


PLOT = """async (json) => {
    const started = performance.now();
    const fig = JSON.parse(json);
    const div = document.createElement('div');
    document.body.replaceChildren(div);
    await Plotly.newPlot(div, fig.data, fig.layout);
    await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
    return (performance.now() - started) / 1000;
}"""


def plotly_test_page(browser):
    """A tab with plotly.js (from the installed plotly package) already loaded."""
    from plotly.offline import get_plotlyjs

    page = browser.new_page()
    page.route("**/*", _blocked)
    page.set_content(f"<html><body><script>{get_plotlyjs()}</script></body></html>", timeout=PAINT_TIMEOUT_MS)
    return page


def figure_paint_seconds(page, figure_json: str) -> float:
    """Seconds from the figure's JSON text to its second painted frame (parse, plot, paint)."""
    return page.evaluate(PLOT, figure_json)


def _bertviz_json_bytes(attention: np.ndarray, labels: list[str]) -> int:
    """Size of the parameters BertViz's own ``model_view`` writes for every layer (full-precision floats).

    Measured one layer at a time (a 512-token model is 37.7 M numbers) and summed.
    """
    import json

    return sum(len(json.dumps(attention[layer].tolist())) for layer in range(attention.shape[0])) + len(json.dumps(labels))


def _row(name: str, size: int, seconds: float | None, note: str | None = None) -> dict:
    paint = note or (f"{seconds:.2f} s" if seconds is not None else f"no paint within {PAINT_TIMEOUT_MS // 1000} s")
    print(f"  {name:<48} {size / 1e6:9.2f} MB   {paint}", flush=True)
    return {"view": name, "bytes": size, "paint_seconds": seconds, "note": note}


def main() -> dict:
    from playwright.sync_api import sync_playwright

    results: dict = {"model": "random BERT, 12 layers × 12 heads, hidden 768", "lengths": {}}
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as p:
        model = load_model(str(build_bert_base_size(Path(folder) / "bert-base-size")))
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        plotly_page = plotly_test_page(browser)
        for n in LENGTHS:
            started = time.perf_counter()
            analysis = analyze(model, TEXT, max_tokens=n)
            forward = time.perf_counter() - started
            view = attention_view(analysis)
            print(f"{n} tokens (forward pass {forward:.1f} s):", flush=True)
            style = {"causal": False, "colorscale": "Cividis"}
            rows = []
            for name, build in (
                ("overview (all 144 heads, one image)", lambda: va.overview_figure(view.matrices, title="overview", **style)),
                ("one layer, 12 heads", lambda: va.layer_grid_figure(view.matrices[5], view.labels, title="layer", **style)),
                ("one head, full precision", lambda: va.head_figure(view.matrices[5, 3], view.labels, title="head", **style)),
            ):
                t0 = time.perf_counter()
                figure_json = build().to_json()
                built = time.perf_counter() - t0
                row = _row(name, len(figure_json), figure_paint_seconds(plotly_page, figure_json))
                row["build_seconds"] = built
                rows.append(row)
            allowed = bv.layer_budget(model.num_heads, n)
            rows.append(_row("BertViz's own model view JSON, all layers", _bertviz_json_bytes(view.matrices, view.labels), None,
                             "paints nothing offline (CDN)"))
            every = bv.model_view_html(view.matrices, view.labels, layers=[0] if n > 256 else list(range(model.num_layers)))
            label = "BertViz model view offline, " + ("1 layer (all 12 would not fit)" if n > 256 else "all 12 layers")
            rows.append(_row(label, len(every), _html_paint_seconds(browser, every, "#vis svg line")))
            print(f"  the page sends BertViz at most {bv.MAX_WEIGHTS:,} weights: {min(allowed, model.num_layers)} layer(s) at {n} tokens", flush=True)
            results["lengths"][n] = {"forward_seconds": forward, "bertviz_layers_sent_by_page": min(allowed, model.num_layers), "views": rows}
        browser.close()
    return results
