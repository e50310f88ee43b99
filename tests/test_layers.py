"""The one numbering of hidden states and layers (blocks), checked against the model's own outputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.model.layers import block_label, hidden_state_label, numbering_caption, writer_of


def test_labels_follow_block_l_writes_hidden_state_l_plus_1():
    assert hidden_state_label(0) == "hidden state 0 (embedding layer output)"
    assert hidden_state_label(3) == "hidden state 3 (output of layer 2)"
    assert block_label(0) == "layer 0 (reads hidden state 0, writes hidden state 1)"
    assert writer_of(0) is None and writer_of(6) == 5
    for k in range(1, 8):
        assert f"writes hidden state {k}" in block_label(writer_of(k))
    with pytest.raises(ValueError):
        hidden_state_label(-1)
    with pytest.raises(ValueError):
        block_label(-1)


def test_caption_names_the_last_hidden_state_and_its_layer():
    caption = numbering_caption(6)
    assert "hidden state 6, the last, is the output of layer 5" in caption
    assert "output of block 6" not in caption and "1 … L" not in caption


def test_writer_matches_the_model(tiny_bert):
    """Hidden state k + 1 is what layer (block) k makes of hidden state k, in the real model."""
    encoded = tiny_bert.tokenizer("the bank of the river", return_tensors="pt")
    with torch.inference_mode():
        out = tiny_bert.model(**encoded, output_hidden_states=True)
        hidden = out.hidden_states
        for k in range(1, len(hidden)):
            block = tiny_bert.model.encoder.layer[writer_of(k)]
            produced = block(hidden[k - 1])
            produced = produced[0] if isinstance(produced, tuple) else produced
            np.testing.assert_allclose(produced.numpy(), hidden[k].numpy(), atol=1e-5)


def test_pages_and_figures_take_their_labels_from_the_helper():
    """No page or figure writes its own layer numbering: the phrases live only in core/model/layers.py."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    own = ["0 = first block", "layer (0 = embedding layer)", "Layer (counted from 0)", "counted from 0; layer *l*",
           "output of block k", "reads hidden state i and writes", "numbered from 0 (layer 0"]
    for path in sorted((root / "app_pages").glob("*.py")) + sorted((root / "viz").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert not [phrase for phrase in own if phrase in text], path.name
    used = {p.name for p in list((root / "app_pages").glob("*.py")) + list((root / "viz").glob("*.py"))
            if "core.model.layers" in p.read_text(encoding="utf-8")}
    for page in ("drift.py", "senses.py", "attention.py", "maxima.py", "compare.py", "inside.py", "stats.py"):
        assert page in used, page


def test_the_last_hidden_state_says_so_and_none_past_it_exists():
    from core.model.layers import example_head_codes, head_code, since_hidden_state

    assert hidden_state_label(6, num_layers=6) == "the last hidden state (6, output of layer 5)"
    assert hidden_state_label(2, num_layers=6) == hidden_state_label(2)
    with pytest.raises(ValueError):
        hidden_state_label(7, num_layers=6)
    assert since_hidden_state(3, 6) == "from hidden state 3 to the last (6)"
    assert head_code(5, 11, 6, 12) == "L5H11"
    for bad in ((6, 0), (0, 12), (-1, 0)):
        with pytest.raises(ValueError):
            head_code(*bad, 6, 12)
    assert example_head_codes(6, 12) == "L0H2 L3H5"
    assert example_head_codes(2, 4) == "L0H2 L1H3"
    assert example_head_codes(1, 1) == "L0H0"
