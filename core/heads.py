"""One attention head recomputed from the model's own weights and the actual input to its layer.

Supported: the BERT family (BERT, RoBERTa, ELECTRA, MiniLM and other ``encoder.layer[i].attention.self``
models), DistilBERT, and GPT-2. Shapes: ``T`` tokens, ``d`` = hidden size / heads.

The input to block ``i`` is ``hidden_states[i]``. BERT-style blocks apply attention to it
directly and LayerNorm afterwards (post-LN); GPT-2 applies its ``ln_1`` LayerNorm first
(pre-LN), so the head reads ``ln_1(hidden_states[i])``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.inference import Analysis
from core.models import LoadedModel

SUPPORTED = "BERT, RoBERTa, ELECTRA, DistilBERT, the bundled MiniLM (all BERT-style encoders) and GPT-2"


class UnsupportedArchitecture(ValueError):
    """The model's attention is laid out in a way this module does not know. Message meant for the user."""


@dataclass(frozen=True)
class HeadWeights:
    """The slices of one head's projections, as ``x @ w + b`` (x: ``[T, hidden]``).

    ``w_q, w_k, w_v``: ``[hidden, d]``; ``b_q, b_k, b_v``: ``[d]``; ``w_o``: ``[d, hidden]``, the
    head's rows of the output projection (its bias is shared by all heads and added once).
    ``scale``: what q·k is multiplied by before the softmax (1/√d, and for GPT-2 models
    trained with ``scale_attn_by_inverse_layer_idx``, also 1/(layer + 1)).
    """

    w_q: np.ndarray
    b_q: np.ndarray
    w_k: np.ndarray
    b_k: np.ndarray
    w_v: np.ndarray
    b_v: np.ndarray
    w_o: np.ndarray
    b_o: np.ndarray
    scale: float


@dataclass(frozen=True)
class HeadComputation:
    """Every step of one head on one input (float64 for exact comparison).

    ``layer_input``: ``[T, hidden]``, what the head reads; ``queries, keys, values``: ``[T, d]``;
    ``scores`` = q·k ``[T, T]``; ``scaled`` = scores × scale, masked entries set to -inf for a decoder;
    ``weights`` = softmax(scaled) per row ``[T, T]``; ``outputs`` = weights @ values ``[T, d]``;
    ``keep_mask``: bool ``[T, T]``, True where a query may look at a key (all True for an encoder,
    lower triangle including the diagonal for a decoder).
    """

    layer: int
    head: int
    layer_input: np.ndarray
    queries: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    scores: np.ndarray
    scaled: np.ndarray
    weights: np.ndarray
    outputs: np.ndarray
    keep_mask: np.ndarray
    scale: float


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy().astype(np.float64)


def _block(model: LoadedModel, layer: int):
    base = model.model
    if not 0 <= layer < model.num_layers:
        raise ValueError(f"layer must be in 0..{model.num_layers - 1}, got {layer}")
    if hasattr(base, "encoder") and hasattr(base.encoder, "layer"):
        block = base.encoder.layer[layer]
        if hasattr(block, "attention") and hasattr(block.attention, "self") and hasattr(block.attention.self, "query"):
            return "bert", block
    if hasattr(base, "transformer") and hasattr(base.transformer, "layer"):
        block = base.transformer.layer[layer]
        if hasattr(block, "attention") and hasattr(block.attention, "q_lin"):
            return "distilbert", block
    if hasattr(base, "h") and hasattr(base.h[layer], "attn") and hasattr(base.h[layer].attn, "c_attn"):
        return "gpt2", base.h[layer]
    raise UnsupportedArchitecture(
        f"Recomputing a head step by step is not available for {model.model_type} models. "
        f"It supports {SUPPORTED}."
    )


def check_supported(model: LoadedModel) -> None:
    """Raise ``UnsupportedArchitecture`` unless this module can take the model's heads apart."""
    _block(model, 0)


def block_kind(model: LoadedModel) -> str:
    """How the model's blocks are laid out: "bert" (BERT-style encoders, post-LN), "distilbert"
    (post-LN) or "gpt2" (pre-LN: ``ln_1`` before attention). Raises ``UnsupportedArchitecture``."""
    return _block(model, 0)[0]


def head_weights(model: LoadedModel, layer: int, head: int) -> HeadWeights:
    """The weights of ``head`` in block ``layer``, from the model itself."""
    kind, block = _block(model, layer)
    if not 0 <= head < model.num_heads:
        raise ValueError(f"head must be in 0..{model.num_heads - 1}, got {head}")
    d = model.hidden_size // model.num_heads
    cols = slice(head * d, (head + 1) * d)
    if kind in ("bert", "distilbert"):
        if kind == "bert":
            q, k, v, o = block.attention.self.query, block.attention.self.key, block.attention.self.value, block.attention.output.dense
        else:
            att = block.attention
            q, k, v, o = att.q_lin, att.k_lin, att.v_lin, att.out_lin

        def split(linear):  # nn.Linear: y = x W^T + b, W is [out, in]
            return _np(linear.weight.T[:, cols]), _np(linear.bias[cols])

        (w_q, b_q), (w_k, b_k), (w_v, b_v) = split(q), split(k), split(v)
        w_o, b_o = _np(o.weight.T[cols, :]), _np(o.bias)
        scale = d**-0.5
    else:
        attn = block.attn
        hidden = model.hidden_size
        w, b = attn.c_attn.weight, attn.c_attn.bias  # Conv1D: y = x W + b, W is [in, 3 * hidden]
        parts = [(_np(w[:, i * hidden : (i + 1) * hidden][:, cols]), _np(b[i * hidden : (i + 1) * hidden][cols])) for i in range(3)]
        (w_q, b_q), (w_k, b_k), (w_v, b_v) = parts
        w_o, b_o = _np(attn.c_proj.weight[cols, :]), _np(attn.c_proj.bias)
        scale = d**-0.5 if getattr(attn, "scale_attn_weights", True) else 1.0
        if getattr(attn, "scale_attn_by_inverse_layer_idx", False):
            scale /= float(layer + 1)
    return HeadWeights(w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, float(scale))


def layer_input(model: LoadedModel, analysis: Analysis, layer: int) -> np.ndarray:
    """``[T, hidden]``: what block ``layer``'s attention reads (GPT-2: after its ``ln_1``)."""
    kind, block = _block(model, layer)
    x = analysis.hidden_states[layer]
    if kind == "gpt2":
        with torch.no_grad():
            x = block.ln_1(torch.from_numpy(np.array(x, dtype=np.float32)).to(model.device)).cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def compute_head(model: LoadedModel, analysis: Analysis, layer: int, head: int) -> HeadComputation:
    """Recompute one head's attention step by step (see ``HeadComputation``)."""
    w = head_weights(model, layer, head)
    x = layer_input(model, analysis, layer)
    q, k, v = x @ w.w_q + w.b_q, x @ w.w_k + w.b_k, x @ w.w_v + w.b_v
    scores = q @ k.T
    t = len(x)
    keep = np.tril(np.ones((t, t), dtype=bool)) if analysis.is_decoder else np.ones((t, t), dtype=bool)
    scaled = np.where(keep, scores * w.scale, -np.inf)
    shifted = scaled - scaled.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    weights = exp / exp.sum(axis=1, keepdims=True)
    return HeadComputation(layer, head, x, q, k, v, scores, scaled, weights, weights @ v, keep, w.scale)


def value_vectors_through_output(model: LoadedModel, analysis: Analysis, layer: int) -> np.ndarray:
    """``[heads, T, hidden]``: f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h for every head h and token j.

    What token j would add to the output if head h gave it all its attention
    (Kobayashi et al. 2020); the shared output bias is left out.
    """
    x = layer_input(model, analysis, layer)
    out = []
    for head in range(model.num_heads):
        w = head_weights(model, layer, head)
        out.append((x @ w.w_v + w.b_v) @ w.w_o)
    return np.stack(out)
