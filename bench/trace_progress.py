"""What the trace's progress callback costs (issue 48, item 6): ``core.model.trace.record`` on SmolLM2-135M at 2,048
tokens without a callback and with one doing the bar's own work but Streamlit's message (the clock, the session's
note of how far it got, ``core.model.pass_progress.layer_progress``), interleaved, ``ROUNDS`` each (a long pass warms itself, as in ``bench.trace``),
medians, on ``bench.trace.THREADS`` torch threads. Run with ``python -m bench trace_progress``.
"""

from __future__ import annotations

import os
import statistics
import time

ROUNDS = 2
MODEL, TOKENS = "SmolLM2-135M-Instruct", 2048


def main() -> dict:
    import torch

    from bench.trace import THREADS
    from core.attention_heads.retrieval import bundled_haystack
    from core.model.models import load_model
    from core.model.pass_progress import layer_progress
    from core.model.trace import record

    torch.set_num_threads(THREADS)
    model = load_model(MODEL)
    text = "\n\n".join([bundled_haystack()] * 3)
    told: list = []
    start = [time.monotonic()]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if done == 0:
            start[0] = now
        told.append((done, total, layer_progress(done, total, now - start[0])))

    plain, with_progress = [], []
    for _ in range(ROUNDS):
        began = time.perf_counter()
        record(model, text, max_tokens=TOKENS)
        plain.append(time.perf_counter() - began)
        told.clear()
        began = time.perf_counter()
        trace = record(model, text, max_tokens=TOKENS, progress=progress)
        with_progress.append(time.perf_counter() - began)
        print(f"plain {plain[-1]:.2f} s, with progress {with_progress[-1]:.2f} s", flush=True)
    calls, callback = list(told), []
    for done, total, _ in calls:  # the callback alone, as often as one pass calls it
        began = time.perf_counter()
        progress(done, total)
        callback.append(time.perf_counter() - began)
    result = {
        "model": MODEL, "tokens": len(trace.tokens("self")), "calls_per_pass": len(calls), "last_said": calls[-2][2],
        "record_s": round(statistics.median(plain), 3), "record_with_progress_s": round(statistics.median(with_progress), 3),
        "ratio": round(statistics.median(with_progress) / statistics.median(plain), 3),
        "callback_total_ms": round(1000 * sum(callback), 3), "load_average": [round(x, 1) for x in os.getloadavg()],
    }
    print(result, flush=True)
    return result
