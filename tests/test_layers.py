"""The one numbering of hidden states and layers (blocks), checked against the model's own outputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.layers import block_label, hidden_state_label, numbering_caption, writer_of


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
