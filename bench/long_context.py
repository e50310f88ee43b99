"""The long-context page and the needle page's depth × length grid: ``core.attention_heads.long_context.long_context_profile`` on the
bundled long text (a raw forward pass of the same model and threads beside it) and ``core.attention_heads.retrieval.depth_length_grid``
on SmolLM2-135M-Instruct, with the process's peak memory and the machine's load while they ran.

``BENCH_LONG_MODELS`` (default ``all-MiniLM-L6-v2:512,SmolLM2-135M-Instruct:2048,gemma-3-270m:2048``): model:tokens
pairs; ``BENCH_GRID_LENGTHS`` (default ``256,512,1024,2048``; empty: no grid)."""

from __future__ import annotations

import os
import resource
import time

import torch

DEFAULT_MODELS = "all-MiniLM-L6-v2:512,SmolLM2-135M-Instruct:2048,gemma-3-270m:2048"


def _peak_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def main() -> dict:
    from core.attention_heads.long_context import long_context_profile, text_ids
    from core.attention_heads.retrieval import (
        DEFAULT_ANSWER,
        DEFAULT_NEEDLE,
        DEFAULT_QUESTION,
        answer_success,
        bundled_haystack,
        depth_length_grid,
        haystack_of_length,
    )
    from core.model.models import load_model
    from core.outputs.predictions import load_language_model

    figures: dict = {"cores": os.cpu_count(), "torch_threads": torch.get_num_threads(), "profiles": {}}
    for entry in os.environ.get("BENCH_LONG_MODELS", DEFAULT_MODELS).split(","):
        name, tokens = entry.rsplit(":", 1)
        model = load_model(name)
        added = len(model.tokenizer("", add_special_tokens=True)["input_ids"])
        text = haystack_of_length(model.tokenizer, bundled_haystack(), int(tokens) - added)
        ids, _, _ = text_ids(model.tokenizer, text, int(tokens))
        load = [round(os.getloadavg()[0], 1)]
        start = time.perf_counter()
        with torch.inference_mode():
            tensor = torch.tensor([ids])
            model.model(input_ids=tensor, attention_mask=torch.ones_like(tensor))
        raw = time.perf_counter() - start
        start = time.perf_counter()
        long_context_profile(model, ids)
        seconds = time.perf_counter() - start
        load.append(round(os.getloadavg()[0], 1))
        figures["profiles"][name] = {"tokens": len(ids), "raw_forward_s": round(raw, 2), "profile_s": round(seconds, 2),
                                     "peak_rss_mb": _peak_mb(), "load_average_1min": load}
        print(name, figures["profiles"][name], flush=True)
    lengths = [int(n) for n in os.environ.get("BENCH_GRID_LENGTHS", "256,512,1024,2048").split(",") if n.strip()]
    if lengths:
        lm = load_language_model(load_model("SmolLM2-135M-Instruct"))
        haystacks = {n: haystack_of_length(lm.tokenizer, bundled_haystack(), n) for n in lengths}
        depths = (0.0, 0.25, 0.5, 0.75, 1.0)
        load = [round(os.getloadavg()[0], 1)]
        start = time.perf_counter()
        grid = depth_length_grid(lambda d, n: answer_success(lm, haystacks[n], DEFAULT_NEEDLE, DEFAULT_QUESTION,
                                                             DEFAULT_ANSWER, d), depths, lengths)
        load.append(round(os.getloadavg()[0], 1))
        figures["grid"] = {"lengths": lengths, "cells": grid.probability.size, "seconds": round(time.perf_counter() - start, 1),
                           "probability": grid.probability.round(4).tolist(), "top": grid.top.tolist(),
                           "load_average_1min": load, "peak_rss_mb": _peak_mb()}
        print("grid", figures["grid"], flush=True)
    return figures
