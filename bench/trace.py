"""One trace per text (issue 48): ``core.model.trace.record`` against the model's own forward pass.

- SmolLM2-135M at 512, 2,048 and 4,096 tokens and gemma-3-270m at 2,048: ``record`` against the same checkpoint loaded
  plainly with transformers' default attention (``attn_implementation="sdpa"``, ``use_cache=False``, nothing kept).
- MiniLM at 128 tokens: ``record`` against a plain eager pass with ``output_attentions=True`` (what ``analyze`` ran).
- Both sides in the same process on ``THREADS`` torch threads (the same on both sides), interleaved,
  ``ROUNDS`` each after a warm-up, medians; the bytes each trace holds (``Trace.nbytes``, no weights asked for) and
  the first head's weights of a layer (the block called again, then its weights) and a second head of it. Each side
  is handed a text of about the case's length (the bundled haystack cut there) and tokenizes it inside the timing.

Run with ``python -m bench trace``. The load average is printed beside the figures (the machine is shared).
"""

from __future__ import annotations

import os
import statistics
import time

ROUNDS = 2
THREADS = 1  # on the shared 2-core machine two torch threads wait for each other (core.causal.flow.contributions_of's note)
CASES = [("all-MiniLM-L6-v2", 128, "eager"), ("SmolLM2-135M-Instruct", 2048, "sdpa"), ("gemma-3-270m", 2048, "sdpa"),
         ("SmolLM2-135M-Instruct", 512, "sdpa"), ("SmolLM2-135M-Instruct", 4096, "sdpa")]
WARM_UP_BELOW = 1024  # a warm-up pass before the timed ones, for the short cases only (a long pass warms itself)


def _median_s(times: list[float]) -> float:
    return round(statistics.median(times), 3)


def _case(name: str, tokens: int, reference: str, models: dict) -> dict:
    import torch
    from transformers import AutoModel

    from core.attention_heads.retrieval import bundled_haystack
    from core.model.models import load_model, threads_for_input
    from core.model.trace import record

    if name not in models:
        loaded = load_model(name)
        models[name] = (loaded, AutoModel.from_pretrained(loaded.source, attn_implementation=reference).eval())
    loaded, plain = models[name]
    haystack = "\n\n".join([bundled_haystack()] * 3)
    cut = loaded.tokenizer(haystack, truncation=True, max_length=tokens, return_offsets_mapping=True)["offset_mapping"]
    text = haystack[: max(end for _, end in cut)]  # a text of about ``tokens`` tokens: both sides tokenize it
    extra = {"use_cache": False} if loaded.is_decoder else {}

    def own() -> None:
        ids = loaded.tokenizer([text], truncation=True, max_length=tokens, return_tensors="pt")["input_ids"]
        with torch.inference_mode(), threads_for_input(ids.numel()):
            plain(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=reference == "eager",
                  output_hidden_states=reference == "eager", **extra)

    def traced():
        return record(loaded, text, max_tokens=tokens)

    if tokens < WARM_UP_BELOW:
        own(), traced()
    own_times, trace_times = [], []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        own()
        own_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        trace = traced()
        trace_times.append(time.perf_counter() - start)
    held = trace.nbytes
    layer = trace.num_layers("self") // 2
    start = time.perf_counter()
    trace.attention("self", layer, heads=[0])
    first_head = time.perf_counter() - start
    start = time.perf_counter()
    trace.attention("self", layer, heads=[1])
    second_head = time.perf_counter() - start
    result = {
        "model": name, "tokens": len(trace.tokens("self")), "reference": reference, "torch_threads": torch.get_num_threads(),
        "reference_s": _median_s(own_times), "record_s": _median_s(trace_times),
        "ratio": round(statistics.median(trace_times) / statistics.median(own_times), 2),
        "trace_mb": round(held / 1e6, 1), "first_head_of_a_layer_s": round(first_head, 3),
        "second_head_s": round(second_head, 3), "load_average": [round(x, 1) for x in os.getloadavg()],
    }
    print(result, flush=True)
    return result


def main() -> dict:
    import torch

    torch.set_num_threads(THREADS)
    models: dict = {}
    results = []
    for name, tokens, reference in CASES:
        results.append(_case(name, tokens, reference, models))
        if name != "SmolLM2-135M-Instruct":
            models.pop(name, None)
    return {"cases": results}
