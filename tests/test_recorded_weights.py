"""Weights recomputed from a recorded pass's queries and keys (``core.model.trace_layers.attention_weights``) against a
plainly loaded eager encoder-decoder's own ``output_attentions``: T5 adds a relative-position bias per head, which the
recomputation must add too (it once left it out: 0.1 off on every T5 head)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForSeq2SeqLM

from core.model.models import load_model
from core.model.recording import Recorder
from core.model.trace_layers import attention_weights
from tests.model_factory import build_tiny_bart, build_tiny_t5


@pytest.mark.parametrize("build", [build_tiny_t5, build_tiny_bart], ids=["t5", "bart"])
def test_recomputed_weights_of_every_stack_equal_the_plain_models(build, tmp_path):
    folder = build(tmp_path / "model")
    model = load_model(str(folder))
    source = model.tokenizer("the bank of the river", return_tensors="pt")
    target = torch.tensor([[model.model.config.decoder_start_token_id, 5, 6, 7, 8]])
    with torch.inference_mode(), Recorder(model.model) as recorder:
        model.model(**source, decoder_input_ids=target)
    plain = AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.inference_mode():
        out = plain(**source, decoder_input_ids=target, output_attentions=True)
    references = {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions, "cross": out.cross_attentions}
    for stack, reference in references.items():
        assert sorted(recorder.stacks[stack]) == list(range(len(reference)))
        for layer, record in recorder.stacks[stack].items():
            np.testing.assert_allclose(attention_weights(record), reference[layer][0].numpy(), atol=1e-6)
            heads = [1, 3]  # a subset of heads and of query rows reads the same cells
            np.testing.assert_allclose(attention_weights(record, heads, rows=slice(1, 3)),
                                       reference[layer][0, heads, 1:3].numpy(), atol=1e-6)
