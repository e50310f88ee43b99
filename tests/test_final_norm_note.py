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


def _said(at) -> str:
    return " ".join(m.value for m in [*at.markdown, *at.caption, *at.info]).replace("\\", "")


# Every view of the last hidden state or of each layer's move up to it (issue 50 item 8: Home alone said it), with a
# query that opens it there: Compare's "Last" line, Drift's corpus caption, Senses at its last hidden state (the
# slider's default), and the tour's three steps that read the last hidden state.
VIEWS = [
    ("app_pages/compare.py", {"text_a": "She sat on the bank of the river.", "text_b": "He paid the bank a visit.",
                              "word": "bank"}),
    ("app_pages/drift.py", {}),
    ("app_pages/senses.py", {"text": "We sat on the bank of the river.", "method": "PCA"}),
    ("app_pages/tour.py", {"track": "attention", "step": "7"}),
    ("app_pages/tour.py", {"track": "attention", "step": "8", "text": "We sat on the bank of the river."}),
    ("app_pages/tour.py", {"track": "attention", "step": "10"}),
]


@pytest.mark.app
@pytest.mark.integration
@pytest.mark.parametrize("model, layers, normed", [("SmolLM2-135M-Instruct", 30, True), ("all-MiniLM-L6-v2", 6, False)])
@pytest.mark.parametrize("page, query", VIEWS)
def test_every_view_of_the_last_hidden_state_says_whether_it_is_after_the_final_norm(page, query, model, layers, normed):
    at = open_app({"model": model} | query, page=page)
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    text = _said(at)
    sentence = f"Hidden state {layers}, the last, is layer {layers - 1}'s output after the model's final norm"
    assert (sentence in text) is normed, text[-600:]
