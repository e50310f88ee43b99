"""Long texts (issue 41): ``analyze`` at 4,096 and 8,192 tokens of SmolLM2-135M and at gemma-3-270m's cap.

- SmolLM2, 4,096 tokens: ``analyze`` (the text's trace, ``core.model.trace.record``: each block's call kept)
  against a raw forward pass of the same model at equal threads (``model(..., output_hidden_states=True)``, eager
  attention, nothing kept), interleaved, ``ROUNDS`` each after a warm-up, medians (target ≤ 1.2×); the bytes the
  cached analysis holds (its arrays, as the cache counts them, target ≤ 600 MB) and the process's resident memory
  before and after the pass, before and after ``release_freed_memory`` (glibc's ``malloc_trim``); a layer's queries
  and keys computed again (its block called on its kept arguments), one head of a layer not yet computed (what a
  click on a new layer costs: that and the weights) and one head of the layer just computed (a head switch), medians.
- SmolLM2 at 8,192 and gemma-3-270m at its cap: each in a fresh process that first loads all three bundled models
  (what a server holds), then analyses, then draws one head as the Attention page does (``pooled_head``) and a head of
  another layer: the times and the process's peak resident memory (VmHWM, MiB) after the pass and after each head
  (target: the whole server within 3 GB, read as 3,000 MB = 2,861 MiB).

Run with ``python -m bench long_analysis``. Report the load average beside the figures (the machine is shared).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

ROUNDS = 3
TOKENS = 4096
HEAD_PIXELS = 1000  # a pooled head's pixels per side: a laptop's main column less the figure's margins


def _rss_mb(field: str = "VmRSS") -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _long_text(tokenizer, tokens: int) -> str:
    """The bundled haystack (Alice, chapters I–III, about 7,000 tokens) three times: cut at ``tokens`` by the limit."""
    from core.attention_heads.retrieval import bundled_haystack

    return "\n\n".join([bundled_haystack()] * 3)


def _median_ms(times: list[float]) -> float:
    return round(statistics.median(times) * 1000, 1)


def smollm2_4096(rounds: int = ROUNDS) -> dict:
    import gc

    import torch

    from core.attention_heads.attention import head_attention
    from core.model.inference import analyze
    from core.model.models import load_model
    from core.model.on_demand import release_freed_memory

    model = load_model("SmolLM2-135M-Instruct")
    text = _long_text(model.tokenizer, TOKENS)

    def raw() -> None:
        encoding = model.tokenizer([text], truncation=True, max_length=TOKENS, return_tensors="pt")
        with torch.inference_mode():
            model.model(**encoding, output_hidden_states=True, return_dict=True, use_cache=False)

    gc.collect()
    release_freed_memory()
    before = _rss_mb()
    analysis = analyze(model, text, max_tokens=TOKENS)
    gc.collect()
    after_pass = _rss_mb()
    release_freed_memory()
    after_release = _rss_mb()
    stored = analysis.trace
    held_mb = (analysis.nbytes + stored.nbytes) / 1e6
    recompute_times, new_layer_times, switch_times = [], [], []
    for layer in (5, 10, 15, 20, 25):  # each layer and the next not in the trace's memo (its last two layers)
        started = time.perf_counter()
        stored.layer("self", layer)
        recompute_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        head_attention(model, analysis, layer + 1, 0)
        new_layer_times.append(time.perf_counter() - started)
        for head in (1, 2):
            started = time.perf_counter()
            head_attention(model, analysis, layer + 1, head)
            switch_times.append(time.perf_counter() - started)
    memo_mb = (analysis.nbytes + stored.nbytes) / 1e6 - held_mb
    raw_times, analyze_times = [], []
    if rounds:
        raw()
    for _ in range(rounds):
        for fn, times in ((raw, raw_times), (lambda: analyze(model, text, max_tokens=TOKENS), analyze_times)):
            started = time.perf_counter()
            fn()
            times.append(time.perf_counter() - started)
    result = {
        "model": model.name,
        "tokens": analysis.num_tokens,
        "torch_threads": torch.get_num_threads(),
        "analysis_arrays_mb": round(held_mb),
        "hidden_states_mb": round(analysis.hidden_states.nbytes / 1e6),
        "trace_mb": round(stored.nbytes / 1e6, 1),
        "memo_after_clicks_mb": round(memo_mb, 1),
        "rss_growth_after_pass_mb": round(after_pass - before),
        "rss_growth_after_release_mb": round(after_release - before),
        "layer_recompute_ms": _median_ms(recompute_times),
        "head_on_new_layer_ms": _median_ms(new_layer_times),
        "head_switch_ms": _median_ms(switch_times),
        "load_average": os.getloadavg(),
    }
    if rounds:
        raw_s, analyze_s = statistics.median(raw_times), statistics.median(analyze_times)
        result.update(raw_forward_s=round(raw_s, 2), analyze_s=round(analyze_s, 2), ratio=round(analyze_s / raw_s, 3))
    return result


def one_long_run(name: str, tokens: int) -> dict:
    """In this process: load every bundled model, analyse ``tokens`` tokens with ``name``, then draw one head of its
    middle layer as the Attention page does (``pooled_head``, both poolings, ``HEAD_PIXELS`` per side), then a head
    of another layer (layer 0: not the memo's); the times and the peak memory (VmHWM) after each step."""
    from core.attention_heads.long_attention import pooled_head
    from core.model.inference import analyze
    from core.model.models import BUNDLED_MODELS, load_model
    from ui.bounded_cache import nbytes_of

    models = {bundled: load_model(bundled) for bundled in BUNDLED_MODELS}
    model = models[name]
    loaded = _rss_mb()
    text = _long_text(model.tokenizer, tokens)
    started = time.perf_counter()
    analysis = analyze(model, text, max_tokens=tokens)
    seconds = time.perf_counter() - started
    peak_pass = _rss_mb("VmHWM")
    after = _rss_mb()
    arrays = nbytes_of(analysis) / 1e6  # before a view asks: the memo's mask is a view of a kept one
    started = time.perf_counter()
    pooled_head(model, analysis, analysis.num_layers // 2, 0, HEAD_PIXELS)
    head_seconds = time.perf_counter() - started
    peak_head, after_head = _rss_mb("VmHWM"), _rss_mb()
    started = time.perf_counter()
    pooled_head(model, analysis, 0, 1, HEAD_PIXELS)
    second_seconds = time.perf_counter() - started
    return {
        "model": name,
        "tokens": analysis.num_tokens,
        "analyze_s": round(seconds, 1),
        "models_loaded_rss_mib": round(loaded),
        "peak_rss_after_pass_mib": round(peak_pass),
        "rss_after_pass_mib": round(after),
        "analysis_arrays_mb": round(arrays),
        "first_head_s": round(head_seconds, 2),
        "peak_rss_after_first_head_mib": round(peak_head),
        "rss_after_first_head_mib": round(after_head),
        "second_head_s": round(second_seconds, 2),
        "peak_rss_after_second_head_mib": round(_rss_mb("VmHWM")),
        "peak_rss_mb": round(_rss_mb("VmHWM") * 1024 * 1024 / 1e6),  # decimal MB, for the 3,000 MB target
        "load_average": os.getloadavg(),
    }


def _in_fresh_process(name: str, tokens: int) -> dict:
    code = f"import json; from bench.long_analysis import one_long_run; print(json.dumps(one_long_run({name!r}, {tokens})))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> dict:
    from core.model.models import load_model

    gemma_cap = load_model("gemma-3-270m").max_tokens
    result = {
        "load_average_start": os.getloadavg(),
        "smollm2_4096": smollm2_4096(),
        "smollm2_8192": _in_fresh_process("SmolLM2-135M-Instruct", 8192),
        "gemma_at_cap": _in_fresh_process("gemma-3-270m", gemma_cap),
        "load_average_end": os.getloadavg(),
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
