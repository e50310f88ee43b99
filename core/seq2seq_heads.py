"""One attention head of an encoder-decoder recomputed from the model's weights (T5 and the BART family).

For encoder self-attention, decoder self-attention and cross-attention. The head reads:

- encoder self-attention, block ``l``: ``source.hidden_states[l]`` (after the block's LayerNorm in
  pre-LN models: T5, mBART, Pegasus);
- decoder self-attention, block ``l``: ``target.hidden_states[l]`` (same rule);
- cross-attention, block ``l``: queries from the decoder after its self-attention sub-layer (residual
  added, LayerNorm as the model places it), keys and values from the encoder's output
  ``source.hidden_states[-1]``.

BART-family scores are ``q·k / √d``; T5's are ``q·k`` plus a learned relative-position bias (self-attention
only), with no scaling. Decoder self-attention is causal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.heads import UnsupportedArchitecture
from core.heads import _np  # tensor → float64 array, as core.heads computes its heads
from core.models import LoadedModel
from core.seq2seq import PairAnalysis

PRE_LN_BART_FAMILY = {"mbart", "pegasus", "plbart", "m2m_100", "nllb-moe", "blenderbot"}
SUPPORTED = "T5 and the BART family (BART, Marian, mBART, Pegasus)"


@dataclass(frozen=True)
class PairHeadComputation:
    """Every step of one head (float64). ``queries [T, d]``, ``keys``/``values [S, d]`` (S = T for self-attention);
    ``scores = q·k [T, S]``; ``bias``: T5's position bias ``[T, S]`` (zeros elsewhere); ``scaled`` = scores ×
    ``scale`` + bias, −∞ where masked; ``weights`` = softmax(scaled); ``outputs`` = weights @ values;
    ``keep_mask``: bool ``[T, S]``."""

    queries: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    scores: np.ndarray
    bias: np.ndarray
    scaled: np.ndarray
    weights: np.ndarray
    outputs: np.ndarray
    keep_mask: np.ndarray
    scale: float


def _torch(x: np.ndarray, model: LoadedModel) -> torch.Tensor:
    return torch.from_numpy(np.asarray(x, dtype=np.float32)).to(model.device)


def family(model: LoadedModel) -> str:
    """"t5" or "bart" (BART-style blocks); raises ``UnsupportedArchitecture`` for other encoder-decoders."""
    base = getattr(model.model, "model", model.model)  # BART-style: the seq2seq LM wraps .model
    if hasattr(model.model, "encoder") and hasattr(model.model.encoder, "block"):
        return "t5"
    if hasattr(base, "encoder") and hasattr(base.encoder, "layers") and hasattr(base.encoder.layers[0], "self_attn"):
        return "bart"
    raise UnsupportedArchitecture(
        f"Recomputing a head step by step is not available for {model.model_type} models. It supports {SUPPORTED}."
    )


def _linear(module: torch.nn.Module, x: np.ndarray, cols: slice) -> np.ndarray:
    w = _np(module.weight)[cols, :]  # nn.Linear: y = x W^T + b
    b = _np(module.bias)[cols] if getattr(module, "bias", None) is not None else 0.0
    return x @ w.T + b


def _softmax(scaled: np.ndarray) -> np.ndarray:
    shifted = scaled - scaled.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def _sublayer_output(attention: torch.nn.Module, out_name: str, weights: np.ndarray, x: np.ndarray, model: LoadedModel,
                     heads: int, v_name: str) -> np.ndarray:
    """Every head's weights ``[H, T, T]`` × its values, concatenated, through the output projection: ``[T, hidden]``."""
    d = getattr(attention, "key_value_proj_dim", None) or getattr(attention, "head_dim")
    values = [_linear(getattr(attention, v_name), x, slice(h * d, (h + 1) * d)) for h in range(heads)]
    mixed = np.concatenate([weights[h] @ values[h] for h in range(heads)], axis=-1)
    out = getattr(attention, out_name)
    return mixed @ _np(out.weight).T + (_np(out.bias) if getattr(out, "bias", None) is not None else 0.0)


def _norm(layer_norm: torch.nn.Module, x: np.ndarray, model: LoadedModel) -> np.ndarray:
    with torch.no_grad():
        return _np(layer_norm(_torch(x, model)))


def compute_pair_head(model: LoadedModel, pair: PairAnalysis, stack: str, layer: int, head: int) -> PairHeadComputation:
    """Recompute ``head`` of block ``layer`` of ``stack`` ("encoder", "decoder" or "cross") step by step."""
    kind = family(model)
    analysis = pair.source if stack == "encoder" else pair.target
    heads = analysis.num_heads
    if not 0 <= layer < (pair.source.num_layers if stack == "encoder" else pair.num_decoder_layers):
        raise ValueError(f"layer {layer} does not exist in the {stack}")
    if not 0 <= head < heads:
        raise ValueError(f"head must be in 0..{heads - 1}, got {head}")
    x = np.asarray(analysis.hidden_states[layer], dtype=np.float64)
    memory = np.asarray(pair.source.hidden_states[-1], dtype=np.float64)
    if kind == "t5":
        stack_module = model.model.encoder if stack == "encoder" else model.model.decoder
        block = stack_module.block[layer]
        self_part = block.layer[0]
        normed = _norm(self_part.layer_norm, x, model)
        if stack == "cross":
            mixed = _sublayer_output(self_part.SelfAttention, "o", pair.target.attentions[layer], normed, model, heads, "v")
            attention = block.layer[1].EncDecAttention
            query_input, key_input = _norm(block.layer[1].layer_norm, x + mixed, model), memory
        else:
            attention, query_input, key_input = self_part.SelfAttention, normed, normed
        q_name, k_name, v_name, scale = "q", "k", "v", 1.0
    else:
        base = getattr(model.model, "model", model.model)
        block = (base.encoder.layers if stack == "encoder" else base.decoder.layers)[layer]
        pre_ln = model.model_type in PRE_LN_BART_FAMILY
        normed = _norm(block.self_attn_layer_norm, x, model) if pre_ln else x
        if stack == "cross":
            mixed = _sublayer_output(block.self_attn, "out_proj", pair.target.attentions[layer], normed, model, heads, "v_proj")
            after = x + mixed if pre_ln else _norm(block.self_attn_layer_norm, x + mixed, model)
            query_input = _norm(block.encoder_attn_layer_norm, after, model) if pre_ln else after
            attention, key_input = block.encoder_attn, memory
        else:
            attention, query_input, key_input = block.self_attn, normed, normed
        q_name, k_name, v_name = "q_proj", "k_proj", "v_proj"
        scale = float(attention.scaling)
    d = getattr(attention, "key_value_proj_dim", None) or getattr(attention, "head_dim")
    cols = slice(head * d, (head + 1) * d)
    q = _linear(getattr(attention, q_name), query_input, cols)
    k = _linear(getattr(attention, k_name), key_input, cols)
    v = _linear(getattr(attention, v_name), key_input, cols)
    scores = q @ k.T
    t, s = scores.shape
    bias = np.zeros((t, s))
    if kind == "t5" and stack != "cross":
        first = (model.model.encoder if stack == "encoder" else model.model.decoder).block[0].layer[0].SelfAttention
        with torch.no_grad():
            bias = _np(first.compute_bias(t, s, device=torch.device(model.device))[0, head])
    keep = np.tril(np.ones((t, s), dtype=bool)) if stack == "decoder" else np.ones((t, s), dtype=bool)
    scaled = np.where(keep, scores * scale + bias, -np.inf)
    weights = _softmax(scaled)
    return PairHeadComputation(q, k, v, scores, bias, scaled, weights, weights @ v, keep, scale)
