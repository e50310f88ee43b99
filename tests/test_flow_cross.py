"""Information flow through cross-attention (core.flow_cross) against hooks on plainly loaded tiny BART and T5."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForSeq2SeqLM

from core.flow_cross import cross_flow
from core.models import load_model
from tests.model_factory import build_tiny_bart, build_tiny_t5

SOURCE, TARGET = "the cat sat on the mat", "the dog sat"


@pytest.fixture(scope="module", params=["bart", "t5"])
def tiny_pair(request, tmp_path_factory):
    """(folder, LoadedModel): a tiny BART (post-norm; here with random biases, which a zero init would hide) and a
    tiny T5 (pre-norm sub-layers, no biases)."""
    folder = tmp_path_factory.mktemp("models") / request.param
    (build_tiny_bart if request.param == "bart" else build_tiny_t5)(folder)
    if request.param == "bart":
        plain = AutoModelForSeq2SeqLM.from_pretrained(folder)
        torch.manual_seed(1)
        with torch.no_grad():
            for name, param in plain.named_parameters():
                if name.endswith("bias"):
                    param.copy_(0.3 * torch.randn_like(param))
        plain.save_pretrained(folder)
    return folder, load_model(str(folder))


def _cross_parts(block):
    """(cross-attention module, its value map, its output map, the norm that reads stream + its output)."""
    if hasattr(block, "encoder_attn"):  # BART
        return block.encoder_attn, block.encoder_attn.v_proj, block.encoder_attn.out_proj, block.encoder_attn_layer_norm
    cross = block.layer[1].EncDecAttention  # T5: the feed-forward sub-layer's norm comes next
    return cross, cross.v, cross.o, block.layer[2].layer_norm


def _plain_cross(folder, model):
    """Per decoder layer, from a plainly loaded eager model: the cross-attention output, the encoder-side values,
    the weights the model returns, the output map's weight and bias, and the sum the next norm reads."""
    plain = AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()
    blocks = plain.get_decoder().layers if hasattr(plain.get_decoder(), "layers") else plain.get_decoder().block
    seen: dict[tuple[str, int], torch.Tensor] = {}
    handles = []
    for i, block in enumerate(blocks):
        cross, value, _, norm = _cross_parts(block)
        handles += [cross.register_forward_hook(lambda m, a, o, i=i: seen.__setitem__(("out", i), o[0][0])),
                    value.register_forward_hook(lambda m, a, o, i=i: seen.__setitem__(("v", i), o[0])),
                    norm.register_forward_pre_hook(lambda m, a, i=i: seen.__setitem__(("sum", i), a[0][0]))]
    source = model.tokenizer(SOURCE)["input_ids"]
    labels = torch.tensor([model.tokenizer(text_target=TARGET)["input_ids"]])
    with torch.no_grad():
        out = plain(input_ids=torch.tensor([source]), labels=labels, output_attentions=True)
    for h in handles:
        h.remove()
    return blocks, seen, out


def test_cross_terms_add_up_to_the_cross_attention_output_less_its_bias(tiny_pair):
    folder, model = tiny_pair
    flow = cross_flow(model, SOURCE, TARGET)
    blocks, seen, _ = _plain_cross(folder, model)
    assert len(flow.records) == len(blocks)
    for layer, block in enumerate(blocks):
        bias = _cross_parts(block)[2].bias
        expected = seen[("out", layer)] - (0 if bias is None else bias)
        if bias is not None:
            assert bias.abs().max() > 0.1  # a bias left in would show
        torch.testing.assert_close(flow.terms(layer).sum(dim=(1, 2)), expected, rtol=1e-4, atol=2e-5)


def test_cross_shares_equal_proximities_by_hand(tiny_pair):
    """By hand in float64: t[i, s, h] = A_h[i, s] · v_h[s] · W_Oʰ from the plain model's values and weights; shares
    of y = the sum the next norm reads, the stream's own part being y − the cross-attention output."""
    folder, model = tiny_pair
    flow = cross_flow(model, SOURCE, TARGET)
    blocks, seen, out = _plain_cross(folder, model)
    for layer, block in enumerate(blocks):
        _, _, projection, _ = _cross_parts(block)
        weights = out.cross_attentions[layer][0].double()  # [H, T, S]
        heads = weights.shape[0]
        w_o = projection.weight.detach().double().T  # [H·d, D]
        d = w_o.shape[0] // heads
        v = seen[("v", layer)].double()  # [S, H·d]
        terms = torch.stack([weights[h][:, :, None] * (v[:, h * d:(h + 1) * d] @ w_o[h * d:(h + 1) * d])[None]
                             for h in range(heads)], dim=2)  # [T, S, H, D]
        y = seen[("sum", layer)].double()
        stream = y - seen[("out", layer)].double()
        near = (y.abs().sum(-1)[:, None, None] - (y[:, None, None] - terms).abs().sum(-1)).clamp(min=0)
        near_stream = (y.abs().sum(-1) - (y - stream).abs().sum(-1)).clamp(min=0)
        total = near.sum(dim=(1, 2)) + near_stream
        np.testing.assert_allclose(flow.attention[layer], (near / total[:, None, None]).numpy(), atol=2e-5)
        np.testing.assert_allclose(flow.residual[layer], (near_stream / total).numpy(), atol=2e-5)
    assert (flow.attention >= 0).all() and (flow.residual >= 0).all()
    np.testing.assert_allclose(flow.attention.sum(axis=(2, 3)) + flow.residual, 1, atol=1e-5)
