"""The "Does it matter?" page: importance map and integrated gradients.

- Importance map (every head knocked out alone, ``core.causal.effects.head_importance``) on the bundled
  all-MiniLM-L6-v2 (72 heads) at 32 tokens, batched (the page's way) and one copy per forward pass
  (the baseline); and on a random bert-base-size model (144 heads) at 128 tokens.
- Integrated gradients, 32 steps, 64 tokens, on the bundled model (``core.causal.token_attribution.token_attribution``).

Best of ``REPEATS`` after one warm-up, as wall time and as this process's CPU time (with one thread,
the wall time an idle core would give). Run: ``python -m bench effects``.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import torch

from core.causal import effects
from core.causal.token_attribution import token_attribution
from core.model.models import load_model
from tests.model_factory import build_bert_base_size

REPEATS = 3
TEXT = "I will hike along the bank of a river and open a new account at my bank to deposit some money . " * 20


def fastest_of(run, repeats: int = REPEATS) -> tuple[float, float, object]:
    """(best wall seconds, best CPU seconds of this process, result). With one thread, CPU seconds are
    what the wall time would be on an otherwise idle core: the figure to read on a shared, loaded machine."""
    run()  # warm-up
    walls, cpus, result = [], [], None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        result = run()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus), result


def _one_copy_per_pass(model, text: str, max_tokens: int) -> None:
    saved = effects.TOKENS_PER_BATCH
    effects.TOKENS_PER_BATCH = 1
    try:
        effects.head_importance(model, text, max_tokens=max_tokens)
    finally:
        effects.TOKENS_PER_BATCH = saved


def main() -> dict:
    bundled = load_model()
    result: dict = {"torch_threads": torch.get_num_threads(), "load_average_at_start": os.getloadavg()[0]}

    def record(name: str, timed: tuple) -> object:
        result[f"{name}_wall_s"], result[f"{name}_cpu_s"] = round(timed[0], 3), round(timed[1], 3)
        return timed[2]

    record("importance_bundled_72_heads_32_tokens", fastest_of(lambda: effects.head_importance(bundled, TEXT, max_tokens=32)))
    record("importance_bundled_one_copy_per_pass", fastest_of(lambda: _one_copy_per_pass(bundled, TEXT, 32), repeats=1))
    attribution = record("integrated_gradients_bundled_32_steps_64_tokens",
                         fastest_of(lambda: token_attribution(bundled, TEXT, steps=32, max_tokens=64)))
    result["integrated_gradients_completeness_gap"] = round(float(attribution.completeness_gap), 6)
    with tempfile.TemporaryDirectory() as folder:
        base = load_model(str(build_bert_base_size(Path(folder) / "bert-base-size")))
        calls = []
        record("importance_bert_base_144_heads_128_tokens",
               fastest_of(lambda: effects.head_importance(base, TEXT, max_tokens=128, progress=lambda done, total: calls.append(done)),
                     repeats=1))
        result["importance_bert_base_forward_passes"] = len(calls) // 2  # warm-up + one timed run
    result["load_average_at_end"] = os.getloadavg()[0]
    for key, value in result.items():
        print(f"{key}: {value}")
    return result
