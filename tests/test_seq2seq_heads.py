"""One head of a tiny T5 / BART recomputed from the weights equals the attention the model returned."""

from __future__ import annotations

import numpy as np
import pytest

from core.attention_heads.inside_pair_head import compute_pair_head, family
from core.model.recording import UnsupportedArchitecture
from core.model.seq2seq import analyze_pair


@pytest.fixture(scope="module")
def pair(tiny_seq2seq):
    return analyze_pair(tiny_seq2seq, "I will hike along the bank of a river.", "the cat sat on the mat")


@pytest.mark.parametrize("stack", ["encoder", "decoder", "cross"])
def test_every_head_is_reproduced(tiny_seq2seq, pair, stack):
    reference = {"encoder": pair.source.attentions, "decoder": pair.target.attentions, "cross": pair.cross_attentions}[stack]
    for layer in range(reference.shape[0]):
        for head in range(reference.shape[1]):
            step = compute_pair_head(tiny_seq2seq, pair, stack, layer, head)
            np.testing.assert_allclose(step.weights, reference[layer, head], atol=1e-5)
            np.testing.assert_allclose(step.outputs, step.weights @ step.values)


def test_shapes_masks_and_scales(tiny_seq2seq, tiny_t5, pair):
    s, t = pair.source.num_tokens, pair.target.num_tokens
    cross = compute_pair_head(tiny_seq2seq, pair, "cross", 0, 0)
    assert cross.queries.shape[0] == t and cross.keys.shape[0] == s and cross.keep_mask.all()
    decoder = compute_pair_head(tiny_seq2seq, pair, "decoder", 0, 0)
    assert (decoder.keep_mask == np.tril(np.ones((t, t), dtype=bool))).all()
    assert np.isneginf(decoder.scaled[~decoder.keep_mask]).all()
    encoder = compute_pair_head(tiny_seq2seq, pair, "encoder", 0, 0)
    d = encoder.queries.shape[1]
    if tiny_seq2seq is tiny_t5:  # no 1/√d; a relative-position bias in self-attention only
        assert encoder.scale == 1.0 and np.abs(encoder.bias).max() > 0 and (cross.bias is None or not cross.bias.any())
    else:
        assert encoder.scale == pytest.approx(d**-0.5) and encoder.bias is None


def test_other_models_are_refused_in_a_sentence(tiny_bert):
    with pytest.raises(UnsupportedArchitecture, match="T5 and the BART family"):
        family(tiny_bert)
