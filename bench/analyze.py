"""``core.model.inference.analyze`` against the raw forward pass it wraps, at 128 tokens on the bundled model.

Raw = tokenizer + ``model(..., output_attentions=True, output_hidden_states=True)`` with nothing
kept; ``analyze`` adds stacking, copies to NumPy and the per-token bookkeeping. Both run
interleaved ``ROUNDS`` times after a warm-up; the medians and their ratio are reported.
Target: ratio <= 1.1. Run with ``python -m bench analyze``.
"""

from __future__ import annotations

import statistics
import time

import torch

TOKENS = 128
ROUNDS = 30
SENTENCE = "I will hike along the bank of a river and then open a new account at my bank in the town . "


def main() -> dict:
    from bench.interaction import text_of_tokens
    from core.model.inference import analyze
    from core.model.models import load_model

    model = load_model(None)
    text = text_of_tokens(model.tokenizer, TOKENS)

    def raw() -> None:
        encoding = model.tokenizer([text], truncation=True, max_length=model.max_tokens, return_tensors="pt")
        with torch.inference_mode():
            model.model(**encoding, output_attentions=True, output_hidden_states=True, return_dict=True)

    def full() -> None:
        analyze(model, text)

    for _ in range(3):
        raw()
        full()
    raw_times, analyze_times = [], []
    for _ in range(ROUNDS):
        for fn, times in ((raw, raw_times), (full, analyze_times)):
            started = time.perf_counter()
            fn()
            times.append(time.perf_counter() - started)
    raw_ms, analyze_ms = statistics.median(raw_times) * 1000, statistics.median(analyze_times) * 1000
    result = {
        "model": model.name,
        "tokens": TOKENS,
        "torch_threads": torch.get_num_threads(),
        "raw_forward_ms": round(raw_ms, 2),
        "analyze_ms": round(analyze_ms, 2),
        "ratio": round(analyze_ms / raw_ms, 3),
    }
    for key, value in result.items():
        print(f"{key:>16}: {value}")
    return result


if __name__ == "__main__":
    main()
