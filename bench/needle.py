"""Needle in a haystack on SmolLM2-135M-Instruct: ``core.attention_heads.retrieval.retrieval_scores`` at 2,048 tokens (one forward
pass: the prompt's trace, each layer's weights for the answer's rows alone; the needle at 50 %), and the machine's load while it ran."""

from __future__ import annotations

import os
import time


def main() -> dict:
    from core.attention_heads.retrieval import (
        DEFAULT_ANSWER,
        DEFAULT_NEEDLE,
        DEFAULT_QUESTION,
        bundled_haystack,
        haystack_of_length,
        retrieval_scores,
    )
    from core.model.models import load_model
    from core.outputs.predictions import load_language_model

    lm = load_language_model(load_model("SmolLM2-135M-Instruct"))
    haystack = haystack_of_length(lm.tokenizer, bundled_haystack(), 2048)
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    result = retrieval_scores(lm, haystack, DEFAULT_NEEDLE, DEFAULT_QUESTION, DEFAULT_ANSWER, 0.5)
    seconds = time.perf_counter() - start
    figures = {"tokens": len(result.token_ids), "retrieval_scores_s": round(seconds, 2),
               "load_average_1min": [round(load_before, 1), round(os.getloadavg()[0], 1)],
               "cores": os.cpu_count(), "answer_probability": result.answer_probability}
    print(figures)
    return figures
