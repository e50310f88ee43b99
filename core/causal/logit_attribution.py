"""Direct logit attribution: how much each head and each MLP writes, directly, towards one answer.

The residual stream at the last position is a sum: the embeddings, every head's output through the attention's
output projection (plus that projection's bias), every MLP's output. The final norm is not linear, but with its
scale frozen at the value it had on this run (``1/rms`` for RMSNorm, ``1/std`` after centring for LayerNorm) it is,
so each part's contribution to ``logit(answer) − logit(wrong)`` is the unembedding difference applied to the
part through the frozen norm. The parts add up exactly to the model's own logit difference. Every part is read from
the text's trace (``core.model.trace``): no pass of its own where the app already holds that trace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from core.model.attention_layers import SINGLE_STACK
from core.model.parts import ModelParts
from core.model.recording import UnsupportedArchitecture
from core.model.tokens import decoded_tokens
from core.model.trace import Trace, record
from core.outputs.causal_lm import causal_parts, single_token
from core.outputs.predictions import LanguageModel, base_model_of


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


def attribution_checks(lm: LanguageModel, answer: str | int, wrong: str | int | None = None
                       ) -> tuple[ModelParts, int, int | None]:
    """``(parts, answer id, wrong id)``: what direct logit attribution reads, checked before any pass. Raises
    ``UnsupportedArchitecture`` (a sentence) for a model that is no causal LM or soft-caps its logits, and
    ``AnalysisError`` for an answer or wrong token that is not one token."""
    parts = causal_parts(lm)
    if getattr(lm.model.config, "final_logit_softcapping", None):
        raise UnsupportedArchitecture("This model soft-caps its logits, so they are not a sum of parts.")
    answer_id = single_token(lm.tokenizer, answer, "answer")
    return parts, answer_id, None if wrong is None else single_token(lm.tokenizer, wrong, "wrong token")


def direct_logit_attribution(lm: LanguageModel, text: str, answer: str | int,
                             wrong: str | int | None = None) -> LogitAttribution:
    """Each head's and MLP's direct contribution to ``logit(answer) − logit(wrong)`` after ``text``, read from the
    text's trace (``core.model.trace.record`` of ``lm``'s base model: one pass) by ``attribution_of``.

    ``answer``/``wrong``: single tokens (" Mary" or an id); without ``wrong`` the target is ``logit(answer)``.
    Raises ``UnsupportedArchitecture`` (a sentence) when the model's residual stream is not the plain sum of
    embeddings, attention outputs and MLP outputs (for example Gemma 2's norms after each sublayer).
    """
    return attribution_of(lm, lambda: record(base_model_of(lm), text), answer, wrong)


def attribution_of(lm: LanguageModel, trace: Trace | Callable[[], Trace], answer: str | int,
                   wrong: str | int | None = None) -> LogitAttribution:
    """``direct_logit_attribution`` at the last position of ``trace`` (a trace of ``lm``'s base model, or of the same
    checkpoint loaded without its head: ``ui.results.traces``; or the call that gives it, made after the checks that
    need no pass, ``attribution_checks``), with no pass of its own: each head's output before the output
    projection (``Trace.head_outputs``) through its slice of that projection, each MLP's output
    (``Trace.mlp_output``), the embeddings (the first block's input) and the biases, each through the final norm frozen
    at the last block's output (``frozen_norm``) and the unembedding. ``total``: the unembedding of the pass's own
    ``last_hidden_state`` (after the final norm), the logits the language model computes from it."""
    parts, answer_id, wrong_id = attribution_checks(lm, answer, wrong)
    trace = trace if isinstance(trace, Trace) else trace()
    layers, out_proj = len(parts.layers), parts.output_projections
    h, d = parts.heads, parts.head_dim
    if trace.stack_names != (SINGLE_STACK,) or trace.num_layers(SINGLE_STACK) != layers:
        raise ValueError(f"the trace is not of a model with one stack of {layers} blocks")
    device = out_proj[0].weight.device

    def last(array: np.ndarray) -> torch.Tensor:
        return torch.tensor(array[..., -1, :], device=device)  # a copy: the trace's arrays are read-only

    with torch.inference_mode():
        heads_out, biases_out, mlp = [], [], []
        for layer in range(layers):
            z = last(trace.head_outputs(SINGLE_STACK, layer))  # [heads, d]: what the output projection read
            if z.shape != (h, d):
                raise ValueError(f"the trace's layer {layer} has {tuple(z.shape)} heads × head size, not {(h, d)}")
            zero = torch.zeros(1, h * d, dtype=z.dtype, device=device)
            separate = torch.zeros(h, h * d, dtype=z.dtype, device=device)
            for head in range(h):
                separate[head, head * d:(head + 1) * d] = z[head]
            bias = out_proj[layer](zero)[0].double()
            heads_out.append(out_proj[layer](separate).double() - bias)  # [heads, hidden]
            biases_out.append(bias)
            mlp.append(last(trace.mlp_output(SINGLE_STACK, layer)).double())
        unembed = lm.model.get_output_embeddings()
        logits = unembed(last(trace.outputs["last_hidden_state"])[None])[0].double()
    embeddings = last(trace.residual_pre(SINGLE_STACK, 0)).double()
    final_x = last(trace.residual_post(SINGLE_STACK, layers - 1))
    heads_out = torch.stack(heads_out)  # [layers, heads, hidden]
    mlps_out = torch.stack(mlp)  # [layers, hidden]
    x = final_x.double()
    rebuilt = embeddings + heads_out.sum((0, 1)) + torch.stack(biases_out).sum(0) + mlps_out.sum(0)
    if not torch.allclose(rebuilt, x, rtol=1e-4, atol=1e-4 * float(x.abs().max())):
        raise UnsupportedArchitecture(
            f"In {lm.model.config.model_type} models the residual stream is not the plain sum of the embeddings, "
            "attention outputs and MLP outputs, so direct logit attribution cannot split it."
        )
    frozen, shift = frozen_norm(parts.final_norm, final_x)
    weight = unembed.weight.detach()
    u = weight[answer_id].double() - (0 if wrong_id is None else weight[wrong_id].double())
    head_bias = 0.0
    if getattr(unembed, "bias", None) is not None:
        bias = unembed.bias.detach()
        head_bias = float(bias[answer_id] - (0 if wrong_id is None else bias[wrong_id]))

    def through(c: torch.Tensor) -> torch.Tensor:
        return frozen(c) @ u

    total = float(logits[answer_id] - (0 if wrong_id is None else logits[wrong_id]))
    tokens = decoded_tokens(lm.tokenizer, trace.tokens(SINGLE_STACK).ids)
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
