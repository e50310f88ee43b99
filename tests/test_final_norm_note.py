"""Issue 50 item 8: a decoder's last hidden state is after the final norm (as transformers returns it), so its move
on Home is partly the norm's gain; Home says so, for exactly the models where it is so."""

from __future__ import annotations

import pytest
import torch

from core.model.parts import last_state_is_normed
from tests.test_app import open_app

BUNDLED = {"bundled": False, "bundled_lm": True, "bundled_gemma": True}


def _by_hand(model) -> bool:
    """The plain model's own modules: BERT's ``encoder.layer``, a decoder's ``layers`` and ``norm``."""
    net = model.model
    base = getattr(net, "model", net)  # a causal LM holds its decoder as .model
    blocks = base.layers if hasattr(base, "layers") else base.encoder.layer
    seen = {}
    handle = blocks[-1].register_forward_hook(lambda _m, _a, out: seen.update(out=out[0] if isinstance(out, tuple) else out))
    ids = model.tokenizer("The bank of the river.", return_tensors="pt")
    try:
        with torch.no_grad():
            last = net(**ids, output_hidden_states=True).hidden_states[-1]
            normed = base.norm(seen["out"]) if hasattr(base, "norm") else None
    finally:
        handle.remove()
    if torch.allclose(last, seen["out"]):
        return False
    assert normed is not None and torch.allclose(last, normed, atol=1e-5, rtol=1e-4)
    return True


@pytest.mark.integration
@pytest.mark.parametrize("fixture", list(BUNDLED))
def test_the_probe_finds_the_final_norm_in_the_last_state(fixture, request):
    model = request.getfixturevalue(fixture)
    assert _by_hand(model) is BUNDLED[fixture]
    assert last_state_is_normed(model.model) is BUNDLED[fixture]


def _home_text(at) -> str:
    return " ".join(m.value for m in at.markdown)


@pytest.mark.app
@pytest.mark.integration
@pytest.mark.parametrize("model, normed", [("gemma-3-270m", True), ("all-MiniLM-L6-v2", False)])
def test_home_says_the_last_row_is_after_the_final_norm(model, normed):
    at = open_app({"model": model, "text": "She sat on the grassy bank of the stream."})
    assert not at.exception and not at.error
    text = _home_text(at)
    assert ("Hidden state 18, the last, is layer 17's output after the model's final norm" in text) is normed
    assert ("final norm" in text) is normed
