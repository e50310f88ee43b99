"""Direct logit attribution: how much each head and each MLP writes, directly, towards one answer.

The residual stream at the last position is a sum: the embeddings, every head's output through the attention's
output projection (plus that projection's bias), every MLP's output. The final norm is not linear, but with its
scale frozen at the value it had on this run (``1/rms`` for RMSNorm, ``1/std`` after centring for LayerNorm) it is,
so each part's contribution to ``logit(answer) − logit(wrong)`` is the unembedding difference applied to the
part through the frozen norm. The parts add up exactly to the model's own logit difference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.model.hooks import hooked, main_input
from core.model.recording import UnsupportedArchitecture
from core.model.tokens import decoded_tokens
from core.outputs.causal_lm import causal_parts, encode, single_token
from core.outputs.predictions import LanguageModel, last_position_only


@dataclass(frozen=True, eq=False)
class LogitAttribution:
    """``heads`` ``[layers, heads]``, ``mlps`` ``[layers]``, ``embeddings``: direct contributions to
    ``logit(answer) − logit(wrong)`` (or to ``logit(answer)`` when there is no wrong token) at the last position;
    ``biases``: the output projections' biases, the final norm's shift and the head's bias (0 for Llama-like
    models); ``total``: the model's own logit difference, equal to the sum of all the parts."""

    heads: np.ndarray
    mlps: np.ndarray
    embeddings: float
    biases: float
    total: float
    tokens: list[str]
    answer_id: int
    wrong_id: int | None

    def __post_init__(self) -> None:
        self.heads.setflags(write=False)
        self.mlps.setflags(write=False)


def frozen_norm(norm: torch.nn.Module, x: torch.Tensor):
    """``(f, shift)``: the final norm at residual ``x`` ``[hidden]`` as ``norm(c) = f(c) + shift`` for ``c`` summing
    to ``x``, with its scale frozen. Raises ``UnsupportedArchitecture`` when the norm is not of a known kind."""
    xd = x.double()
    if isinstance(norm, torch.nn.LayerNorm):
        scale = 1 / torch.sqrt(xd.var(unbiased=False) + norm.eps)
        weight = norm.weight.detach().double() if norm.weight is not None else torch.ones_like(xd)
        shift = norm.bias.detach().double() if norm.bias is not None else torch.zeros_like(xd)
        return (lambda c: weight * (c - c.mean(-1, keepdim=True)) * scale), shift
    eps = getattr(norm, "variance_epsilon", None) or getattr(norm, "eps", None)
    if eps is None:
        raise UnsupportedArchitecture("Direct logit attribution does not know this model's final norm.")
    with torch.inference_mode():  # an RMS norm of a vector of ones is its gain times 1/sqrt(1 + eps)
        gain = norm(torch.ones_like(x)[None])[0].double() * np.sqrt(1 + eps)
    scale = 1 / torch.sqrt((xd**2).mean() + eps)
    return (lambda c: gain * c * scale), torch.zeros_like(xd)


def direct_logit_attribution(lm: LanguageModel, text: str, answer: str | int,
                             wrong: str | int | None = None) -> LogitAttribution:
    """Each head's and MLP's direct contribution to ``logit(answer) − logit(wrong)`` after ``text``.

    ``answer``/``wrong``: single tokens (" Mary" or an id); without ``wrong`` the target is ``logit(answer)``.
    Raises ``UnsupportedArchitecture`` (a sentence) when the model's residual stream is not the plain sum of
    embeddings, attention outputs and MLP outputs (for example Gemma 2's norms after each sublayer).
    """
    parts = causal_parts(lm)
    layers = len(parts.layers)
    out_proj = parts.output_projections
    if getattr(lm.model.config, "final_logit_softcapping", None):
        raise UnsupportedArchitecture("This model soft-caps its logits, so they are not a sum of parts.")
    answer_id = single_token(lm.tokenizer, answer, "answer")
    wrong_id = None if wrong is None else single_token(lm.tokenizer, wrong, "wrong token")
    ids = encode(lm, text)
    z: list = [None] * layers
    mlp: list = [None] * layers
    final: dict[str, torch.Tensor] = {}
    hooks = []
    for layer in range(layers):
        def pre(module, args, kwargs, layer=layer):
            z[layer] = main_input(args, kwargs, "input")[0, -1].detach().clone()
        def post(module, args, output, layer=layer):
            mlp[layer] = output[0, -1].detach().clone()
        hooks += [(out_proj[layer], "pre", pre), (parts.layers[layer].mlp, "post", post)]

    def norm_input(module, args, kwargs):
        final["x"] = main_input(args, kwargs)[0, -1].detach().clone()
    hooks.append((parts.final_norm, "pre", norm_input))
    with hooked(hooks), torch.inference_mode():
        out = lm.model(input_ids=ids[None], output_hidden_states=True, **last_position_only(lm.model))
        logits = out.logits[0, -1].double()
        embeddings = out.hidden_states[0][0, -1].double()
        heads_out, biases_out = [], []
        h, d = parts.heads, parts.head_dim
        for layer in range(layers):
            zero = torch.zeros(1, h * d, dtype=z[layer].dtype, device=z[layer].device)
            separate = torch.zeros(h, h * d, dtype=z[layer].dtype, device=z[layer].device)
            for head in range(h):
                separate[head, head * d:(head + 1) * d] = z[layer][head * d:(head + 1) * d]
            bias = out_proj[layer](zero)[0].double()
            heads_out.append(out_proj[layer](separate).double() - bias)  # [heads, hidden]
            biases_out.append(bias)
    heads_out = torch.stack(heads_out)  # [layers, heads, hidden]
    mlps_out = torch.stack([m.double() for m in mlp])  # [layers, hidden]
    x = final["x"].double()
    rebuilt = embeddings + heads_out.sum((0, 1)) + torch.stack(biases_out).sum(0) + mlps_out.sum(0)
    if not torch.allclose(rebuilt, x, rtol=1e-4, atol=1e-4 * float(x.abs().max())):
        raise UnsupportedArchitecture(
            f"In {lm.model.config.model_type} models the residual stream is not the plain sum of the embeddings, "
            "attention outputs and MLP outputs, so direct logit attribution cannot split it."
        )
    frozen, shift = frozen_norm(parts.final_norm, final["x"])
    unembed = lm.model.get_output_embeddings()
    weight = unembed.weight.detach()
    u = weight[answer_id].double() - (0 if wrong_id is None else weight[wrong_id].double())
    head_bias = 0.0
    if getattr(unembed, "bias", None) is not None:
        bias = unembed.bias.detach()
        head_bias = float(bias[answer_id] - (0 if wrong_id is None else bias[wrong_id]))

    def through(c: torch.Tensor) -> torch.Tensor:
        return frozen(c) @ u

    total = float(logits[answer_id] - (0 if wrong_id is None else logits[wrong_id]))
    tokens = decoded_tokens(lm.tokenizer, ids.tolist())
    return LogitAttribution(
        heads=through(heads_out).cpu().numpy(),
        mlps=through(mlps_out).cpu().numpy(),
        embeddings=float(through(embeddings)),
        biases=float(through(torch.stack(biases_out).sum(0)) + shift @ u) + head_bias,
        total=total,
        tokens=tokens,
        answer_id=answer_id,
        wrong_id=wrong_id,
    )
