"""The bundled language model, SmolLM2-135M-Instruct (30 layers × 9 heads, 3 key/value heads): issue 26's and
issue 27's figures.

- a later load in a new process (the converted cache exists), server memory with both bundled models loaded;
- ``analyze`` at 128 tokens against a raw eager forward pass on the same thread count;
- a head click at 128 tokens (``compute_head`` and the head figure, as the page draws it);
- the all-heads overview (270 heads) painted in Chromium from its JSON;
- the importance map at 32 tokens (every head knocked out in turn);
- residual and per-head patching on the 14-token name-mover prompt, direct logit attribution, the lens grid, a
  sampling-slider change (the distribution reshaped), induction scores;
- 40 protocol-level sessions opening /attention with SmolLM2 at once, each with its own text.

Run with ``python -m bench language_model``.
"""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from bench.senses import best_of

MODEL = "SmolLM2-135M-Instruct"
SESSIONS = 40
CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Mary and John went to the store, Mary gave a drink to"
LONG_TEXT = "I will hike along the bank of a river and open a new account at my bank. " * 20


def _later_load_seconds() -> float:
    code = (
        "import time; t = time.perf_counter(); from core.model.models import load_model; "
        f"load_model({MODEL!r}); print(time.perf_counter() - t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    return float(out.stdout.strip().splitlines()[-1])


def _overview_paint_seconds(figure_json: str) -> float:
    from playwright.sync_api import sync_playwright

    from bench.attention import CHROMIUM, figure_paint_seconds, plotly_test_page

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = plotly_test_page(browser)
            figure_paint_seconds(page, figure_json)  # the first plot compiles Plotly's code paths
            return min(figure_paint_seconds(page, figure_json) for _ in range(3))
        finally:
            browser.close()


def _sessions() -> dict:
    from bench.protocol import view_pages
    from tests.browser.conftest import serve_app
    from tests.browser.load import PeakRSS, percentile

    words = ["apple", "river", "guitar", "planet", "pencil", "tiger", "castle", "rocket", "violin", "garden"]
    texts = [f"The {words[i % 10]} was left beside door {i // 10 + 1} today." for i in range(SESSIONS)]
    with tempfile.TemporaryDirectory() as tmp:
        with serve_app(Path(tmp) / "server.log") as (url, proc), PeakRSS(proc.pid) as rss:
            asyncio.run(view_pages(url, "attention", [{"model": MODEL, "text": "A warm-up sentence."}]))
            started = time.perf_counter()
            views = asyncio.run(view_pages(url, "attention", [{"model": MODEL, "text": t} for t in texts]))
            wall = time.perf_counter() - started
    finished = sorted(v.seconds for v in views if not math.isnan(v.seconds))
    return {
        "sessions": SESSIONS,
        "p50_seconds": round(percentile(finished, 50), 2),
        "p95_seconds": round(percentile(finished, 95), 2),
        "max_seconds": round(finished[-1], 2),
        "wall_seconds": round(wall, 1),
        "errors": sum(len(v.errors) for v in views),
        "server_peak_rss_mb": round(rss.peak / 2**20),
    }


def main() -> dict:
    import psutil

    from core.attention_heads.induction import induction_scores
    from core.attention_heads.inside_head import compute_head
    from core.causal.effects import head_importance
    from core.causal.logit_attribution import direct_logit_attribution
    from core.causal.patching import patch_heads, patch_residual
    from core.model.inference import analyze
    from core.model.models import load_model
    from core.model.tokens import token_labels
    from core.outputs.generation import next_token_distribution
    from core.outputs.lens import lens_summary, logit_lens
    from core.outputs.predictions import NoLanguageModelHead, load_language_model
    from viz.attention import head_figure, overview_figure

    result: dict = {"model": MODEL, "torch_threads": torch.get_num_threads()}
    result["later_load_new_process_seconds"] = round(_later_load_seconds(), 2)
    minilm = load_model("all-MiniLM-L6-v2")
    model = load_model(MODEL)
    lm = load_language_model(model)
    try:
        load_language_model(minilm)  # as the Predictions page tries it: the sentence encoder has no head to load
    except NoLanguageModelHead:
        pass
    result["rss_both_models_and_lm_head_mb"] = round(psutil.Process().memory_info().rss / 2**20)
    del minilm

    analysis = analyze(model, LONG_TEXT, max_tokens=128)
    inputs = {"input_ids": torch.tensor([analysis.input_ids])}
    with torch.inference_mode():
        raw = best_of(5, lambda: model.model(**inputs, output_attentions=True))
    result["analyze_128_seconds"] = round(best_of(5, lambda: analyze(model, LONG_TEXT, max_tokens=128)), 3)
    result["raw_eager_forward_128_seconds"] = round(raw, 3)
    result["analyze_over_raw"] = round(result["analyze_128_seconds"] / raw, 2)
    labels = token_labels(analysis)

    def head_click():
        head = compute_head(model, analysis, 15, 4)
        head_figure(head.weights, labels, title="layer 15, head 4", causal=True, colorscale="Blues").to_json()

    result["head_click_128_seconds"] = round(best_of(5, head_click), 3)
    short = analyze(model, CLEAN)
    overview = overview_figure(short.attentions, title="every head", causal=True, colorscale="Blues")
    result["overview_270_heads_paint_seconds"] = round(_overview_paint_seconds(overview.to_json()), 3)

    started = time.perf_counter()
    head_importance(model, LONG_TEXT, max_tokens=32)
    result["importance_map_32_seconds"] = round(time.perf_counter() - started, 2)

    started = time.perf_counter()
    patch_residual(lm, CLEAN, CORRUPTED, " Mary", " John")
    result["patch_residual_14_tokens_seconds"] = round(time.perf_counter() - started, 2)
    started = time.perf_counter()
    patch_heads(lm, CLEAN, CORRUPTED, " Mary", " John")
    result["patch_heads_270_seconds"] = round(time.perf_counter() - started, 2)
    result["direct_logit_attribution_seconds"] = round(best_of(3, lambda: direct_logit_attribution(lm, CLEAN, " Mary", " John")), 3)
    result["lens_grid_seconds"] = round(best_of(3, lambda: lens_summary(logit_lens(lm, analyze(model, CLEAN), k=1).final_ranks)), 3)
    next_token_distribution(lm, CLEAN)
    result["sampling_slider_seconds"] = round(best_of(5, lambda: next_token_distribution(lm, CLEAN, temperature=0.7, top_k=40, top_p=0.9)), 3)
    result["induction_scores_seconds"] = round(best_of(3, lambda: induction_scores(model)), 3)
    result["attention_40_sessions"] = _sessions()
    for key, value in result.items():
        print(f"{key:>36}: {value}", flush=True)
    return result


if __name__ == "__main__":
    main()
