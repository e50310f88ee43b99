"""Long texts (issue 41): ``analyze`` at 4,096 and 8,192 tokens of SmolLM2-135M and at gemma-3-270m's cap.

- SmolLM2, 4,096 tokens: ``analyze`` (weights on demand: queries and keys kept, attention run in 256-row blocks)
  against a raw forward pass of the same model at equal threads (``model(..., output_hidden_states=True)``, eager
  attention, nothing kept), interleaved, ``ROUNDS`` each after a warm-up, medians (target ≤ 1.2×); the bytes the
  cached analysis holds (its arrays, as the cache counts them, and the process's resident memory before and after,
  target ≤ 600 MB); one head's ``core.attention.head_attention`` (median of 5).
- SmolLM2 at 8,192 and gemma-3-270m at its cap: each in a fresh process that first loads all three bundled models
  (what a server holds), then analyses: the time and the process's peak resident memory (target: 3 GB).

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


def _rss_mb(field: str = "VmRSS") -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _long_text(tokenizer, tokens: int) -> str:
    """The bundled haystack (Alice, chapters I–III, about 7,000 tokens) three times: cut at ``tokens`` by the limit."""
    from core.retrieval import bundled_haystack

    return "\n\n".join([bundled_haystack()] * 3)


def smollm2_4096() -> dict:
    import gc

    import torch

    from core.attention import head_attention
    from core.inference import analyze
    from core.models import load_model
    from ui.bounded_cache import nbytes_of

    model = load_model("SmolLM2-135M-Instruct")
    text = _long_text(model.tokenizer, TOKENS)

    def raw() -> None:
        encoding = model.tokenizer([text], truncation=True, max_length=TOKENS, return_tensors="pt")
        with torch.inference_mode():
            model.model(**encoding, output_hidden_states=True, return_dict=True, use_cache=False)

    gc.collect()
    before = _rss_mb()
    analysis = analyze(model, text, max_tokens=TOKENS)
    gc.collect()
    held_rss = _rss_mb() - before
    raw_times, analyze_times = [], []
    raw()
    for _ in range(ROUNDS):
        for fn, times in ((raw, raw_times), (lambda: analyze(model, text, max_tokens=TOKENS), analyze_times)):
            started = time.perf_counter()
            fn()
            times.append(time.perf_counter() - started)
    head_times = []
    for head in range(5):
        started = time.perf_counter()
        head_attention(model, analysis, 15, head)
        head_times.append(time.perf_counter() - started)
    raw_s, analyze_s = statistics.median(raw_times), statistics.median(analyze_times)
    return {
        "model": model.name,
        "tokens": analysis.num_tokens,
        "torch_threads": torch.get_num_threads(),
        "raw_forward_s": round(raw_s, 2),
        "analyze_s": round(analyze_s, 2),
        "ratio": round(analyze_s / raw_s, 3),
        "analysis_arrays_mb": round(nbytes_of(analysis) / 1e6),
        "analysis_rss_growth_mb": round(held_rss),
        "head_attention_ms": round(statistics.median(head_times) * 1000, 1),
    }


def one_long_run(name: str, tokens: int) -> dict:
    """In this process: load every bundled model, analyse ``tokens`` tokens with ``name``; time and peak memory."""
    from core.inference import analyze
    from core.models import BUNDLED_MODELS, load_model
    from ui.bounded_cache import nbytes_of

    models = {bundled: load_model(bundled) for bundled in BUNDLED_MODELS}
    model = models[name]
    loaded = _rss_mb()
    text = _long_text(model.tokenizer, tokens)
    started = time.perf_counter()
    analysis = analyze(model, text, max_tokens=tokens)
    seconds = time.perf_counter() - started
    return {
        "model": name,
        "tokens": analysis.num_tokens,
        "analyze_s": round(seconds, 1),
        "models_loaded_rss_mb": round(loaded),
        "peak_rss_mb": round(_rss_mb("VmHWM")),
        "rss_after_mb": round(_rss_mb()),
        "analysis_arrays_mb": round(nbytes_of(analysis) / 1e6),
    }


def _in_fresh_process(name: str, tokens: int) -> dict:
    code = f"import json; from bench.long_analysis import one_long_run; print(json.dumps(one_long_run({name!r}, {tokens})))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> dict:
    from core.models import load_model

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
