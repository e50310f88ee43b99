"""Knocking heads out through ``core.model.recording.Recorder.replace`` and finding a model's parts (``core.model.parts``).

On SmolLM2-135M-Instruct (30 layers × 9 heads), one 20-token sentence, one torch thread:

- ``analyze`` and ``ablate_heads`` (three heads, zero and mean): the knock-out's cost is the difference;
- the importance map (every head knocked out alone, ``head_importance``) at 16 tokens;
- the first lookup of the model's parts (``core.model.parts.parts_of``: one probe pass over four tokens; once per model) and
  a head click after it (``compute_head`` and the values through the output projection, records kept by ``analyze``).

Best of ``REPEATS`` after one warm-up, as wall time and as this process's CPU time (with one thread, the wall time an
idle core would give: the figure to read on a shared, loaded machine), with the load average. Run:
``python -m bench knockout``.
"""

from __future__ import annotations

import os
import time

import torch

from core.attention_heads.inside_head import compute_head, value_vectors_through_output
from core.causal.effects import ablate_heads, head_importance
from core.model.bundled_lm import LM_NAME
from core.model.inference import analyze
from core.model.models import load_model
from core.model.parts import parts_of

REPEATS = 7
TEXT = "The quick brown fox jumps over the lazy dog because it was bored and the sun was warm."
HEADS = [(0, 1), (5, 2), (20, 7)]


def _timed(run) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def fastest_of(run, repeats: int = REPEATS) -> tuple[float, float]:
    run()  # warm-up
    walls, cpus = zip(*(_timed(run) for _ in range(repeats)), strict=True)
    return min(walls), min(cpus)


def main() -> dict:
    torch.set_num_threads(1)
    result: dict = {"load_average_at_start": os.getloadavg()[0]}

    def record(name: str, timed: tuple[float, float]) -> None:
        result[f"{name}_wall_s"], result[f"{name}_cpu_s"] = round(timed[0], 4), round(timed[1], 4)

    model = load_model(LM_NAME)
    analysis = analyze(model, TEXT)
    record("parts_first_lookup", _timed(lambda: parts_of(model.model)))
    layers = iter(range(10**6))

    def click() -> None:  # the next layer's head 1, as a learner stepping through the layers
        layer = next(layers) % model.num_layers
        compute_head(model, analysis, layer, 1)
        value_vectors_through_output(model, analysis, layer)

    record("head_click", fastest_of(click))
    record("analyze", fastest_of(lambda: analyze(model, TEXT)))
    record("ablate_heads_zero", fastest_of(lambda: ablate_heads(model, TEXT, HEADS)))
    record("ablate_heads_mean", fastest_of(lambda: ablate_heads(model, TEXT, HEADS, method="mean")))
    record("importance_270_heads_16_tokens", fastest_of(lambda: head_importance(model, TEXT, max_tokens=16), repeats=1))
    result["load_average_at_end"] = os.getloadavg()[0]
    print(result)
    return result
