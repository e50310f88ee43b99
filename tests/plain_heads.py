"""An independent reference for one attention layer: the checkpoint loaded plainly (eager attention), the
attention module's input caught with a forward pre-hook, and every head's queries, keys and values projected by
hand (numpy) from that module's own weights. Knows each family's layout, as the app no longer needs to."""

from __future__ import annotations

import numpy as np
import torch


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().numpy()


def attention_module(plain: torch.nn.Module, layer: int) -> torch.nn.Module:
    """The module of block ``layer`` whose input is what every head reads (GPT-2: after ``ln_1``)."""
    if hasattr(plain, "h"):
        return plain.h[layer].attn
    if hasattr(plain, "transformer"):
        return plain.transformer.layer[layer].attention
    return plain.encoder.layer[layer].attention.self


def _projections(module: torch.nn.Module, plain: torch.nn.Module, layer: int):
    """``(w_q, b_q, w_k, b_k, w_v, b_v, w_o)`` as ``x @ w + b``, ``w_o`` ``[H * d, hidden]``."""
    if hasattr(module, "c_attn"):  # GPT-2: Conv1D, weight [in, 3 * hidden] = [q | k | v]
        w, b = _np(module.c_attn.weight), _np(module.c_attn.bias)
        n = w.shape[1] // 3
        return w[:, :n], b[:n], w[:, n:2 * n], b[n:2 * n], w[:, 2 * n:], b[2 * n:], _np(module.c_proj.weight)
    if hasattr(module, "q_lin"):  # DistilBERT
        parts, out = (module.q_lin, module.k_lin, module.v_lin), module.out_lin
    else:  # BERT, RoBERTa, ELECTRA: the output projection sits beside the self-attention
        parts, out = (module.query, module.key, module.value), plain.encoder.layer[layer].attention.output.dense
    flat = [a for linear in parts for a in (_np(linear.weight).T, _np(linear.bias))]
    return (*flat, _np(out.weight).T)


def plain_layer(plain: torch.nn.Module, heads: int, layer: int, inputs: dict) -> dict:
    """The plain model on ``inputs`` (a batch): ``x [B, T, hidden]`` (the attention module's input), ``q, k, v``
    ``[B, H, T, d]``, ``w_o [H * d, hidden]``, ``weights [B, H, T, T]`` (the model's own ``output_attentions``)."""
    module = attention_module(plain, layer)
    seen = {}

    def keep_input(_module, args, kwargs):
        seen["x"] = kwargs.get("hidden_states", args[0] if args else None)

    handle = module.register_forward_pre_hook(keep_input, with_kwargs=True)
    try:
        with torch.no_grad():
            out = plain(**inputs, output_attentions=True)
    finally:
        handle.remove()
    x = _np(seen["x"])
    w_q, b_q, w_k, b_k, w_v, b_v, w_o = _projections(module, plain, layer)
    b, t, _ = x.shape

    def split(y):  # [B, T, H * d] -> [B, H, T, d]
        return y.reshape(b, t, heads, -1).transpose(0, 2, 1, 3)

    return {"x": x, "q": split(x @ w_q + b_q), "k": split(x @ w_k + b_k), "v": split(x @ w_v + b_v), "w_o": w_o,
            "weights": _np(out.attentions[layer])}


def softmax_weights(q: np.ndarray, k: np.ndarray, scale: float, keep: np.ndarray) -> np.ndarray:
    """softmax(q·k × scale) over keys, ``keep`` False → weight 0 (numpy, by hand)."""
    scaled = np.where(keep, q @ np.swapaxes(k, -1, -2) * scale, -np.inf)
    e = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def zero_heads_hook(heads, head_dim: int):
    """A forward pre-hook for a plain model's output projection that zeroes ``heads``' slices of its input: the
    independent reference for a knock-out."""
    def hook(_module, args):
        x = args[0].clone()
        for h in heads:
            x[..., h * head_dim:(h + 1) * head_dim] = 0
        return (x,)
    return hook
