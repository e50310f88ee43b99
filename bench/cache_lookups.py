"""What a head click costs the server before any drawing: the cache lookups of ``/attention`` when every result is
already kept (the model, the analysis, the attention view and the figure), on the bundled model at 128 tokens.

Each lookup turns the model name into a ``Run`` and finds the result through its declaration (``ui.results``).
``ROUNDS`` × ``CALLS`` clicks' lookups are timed in process CPU-seconds (what load distorts least);
the best round's mean per click is reported, with the load average. Run with ``python -m bench cache_lookups``.
"""

from __future__ import annotations

import os
import time

from bench.interaction import text_of_tokens
from core.model.models import DEFAULT_MODEL
from ui import results
from ui.models import loaded_model

TOKENS = 128
ROUNDS = 5
CALLS = 2000


def main() -> dict:
    name = DEFAULT_MODEL
    text = text_of_tokens(loaded_model(name).tokenizer, TOKENS)

    def click() -> None:
        loaded_model(name)
        results.analyses(name, text, max_tokens=TOKENS)
        results.attention_views(name, text, "raw", "show", False, max_tokens=TOKENS)
        results.figures(name, text, "head", 3, 5, max_tokens=TOKENS, build=lambda: object())

    click()  # computes and keeps everything once
    rounds = []
    for _ in range(ROUNDS):
        started = time.process_time()
        for _ in range(CALLS):
            click()
        rounds.append((time.process_time() - started) / CALLS)
    result = {"model": name, "tokens": TOKENS, "cpu_us_per_click": round(min(rounds) * 1e6, 1),
              "load_average": [round(x, 2) for x in os.getloadavg()]}
    print(f"{name}, {TOKENS} tokens: a head click's cache lookups take {result['cpu_us_per_click']} µs of CPU "
          f"(best of {ROUNDS} × {CALLS}; load average {result['load_average']})")
    return result
