"""Issue 48's figure: after the first page on a long text, how long each further read-only page takes to draw, and how
many full passes it runs. One AppTest process, SmolLM2-135M-Instruct, the bundled long text cut to 4,096 tokens; the
pages opened as a user clicks through them, Attention first (the page that reads the whole text). A page's time is its
whole script run in AppTest (every figure computed and sent), an upper bound on its first figure in a browser."""

from __future__ import annotations

import os
import time
from pathlib import Path

MODEL = "SmolLM2-135M-Instruct"
TOKENS = 4096
PAGES = ["attention", "home", "maxima", "stats", "inside", "flow", "long-context"]


def main() -> dict:
    import torch
    from streamlit.testing.v1 import AppTest

    from core.attention_heads.retrieval import bundled_haystack, haystack_of_length
    from core.model.models import load_model

    model = load_model(MODEL)
    text = haystack_of_length(model.tokenizer, bundled_haystack(), TOKENS - 1)
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=1800)
    at.query_params.update({"model": MODEL, "text": text, "source": "sidebar", "length": str(TOKENS)})
    found, counted = {}, [0]
    prefix = torch.tensor(model.tokenizer(text)["input_ids"][:64])

    def count(module, args):  # a token-embedding call whose rows begin with the text: one full pass (any cut)
        if isinstance(module, torch.nn.Embedding) and args and isinstance(args[0], torch.Tensor):
            rows = args[0].reshape(-1, args[0].shape[-1])
            if rows.shape[-1] >= len(prefix) and not rows.is_floating_point():
                counted[0] += int((rows[:, : len(prefix)] == prefix).all(dim=1).sum())

    handle = torch.nn.modules.module.register_module_forward_pre_hook(count)
    try:
        for page in PAGES:
            before, start = counted[0], time.perf_counter()
            at.switch_page(f"app_pages/{page}.py")
            at.run()
            seconds = time.perf_counter() - start
            found[page] = {"seconds": round(seconds, 1), "passes": counted[0] - before,
                           "errors": [e.value for e in at.exception]}
            print(f"{page}: {seconds:.1f} s, {found[page]['passes']} full pass(es)", flush=True)
    finally:
        handle.remove()
    found["load average"] = os.getloadavg()
    print("load average", found["load average"])
    return found
