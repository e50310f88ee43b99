"""One attention head recomputed from the model's own weights and the actual input to its layer.

Supported, decided by ``config.model_type`` (never by module names, which pre-LN MegatronBERT and
rotary RoFormer share with BERT): BERT (and the bundled MiniLM), RoBERTa, XLM-RoBERTa, CamemBERT,
ELECTRA, DistilBERT and GPT-2 (``ARCHITECTURES``). Decoders loaded with ``core.recording``'s attention (Llama, Mistral,
Qwen2/3, Gemma 1/2/3, Phi-3, SmolLM2 and any family whose attention goes through transformers' interface)
are read from a recorded forward pass instead (``core.recorded_heads``, kind "recorded"): queries and keys
before and after the rotary embedding, the shared key/value head, sliding windows and soft-caps. Shapes: ``T`` tokens, ``d`` = hidden size / heads.

The input to block ``i`` is ``hidden_states[i]``. BERT-style blocks apply attention to it
directly and LayerNorm afterwards (post-LN); GPT-2 applies its ``ln_1`` LayerNorm first
(pre-LN), so the head reads ``ln_1(hidden_states[i])``. Every recomputation is checked against
the attention the model itself returned (``verify_layer``) before anything built on it is shown.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.inference import Analysis
from core.models import LoadedModel
from core.recording import UnsupportedArchitecture, is_recordable  # noqa: F401 - UnsupportedArchitecture re-exported

SUPPORTED = ("BERT, RoBERTa, XLM-RoBERTa, CamemBERT, ELECTRA, DistilBERT, the bundled MiniLM (all post-LN encoders), GPT-2, "
             "and decoders whose attention goes through transformers' attention interface (Llama, Mistral, Qwen, Gemma, "
             "Phi-3, SmolLM …)")
# Largest difference allowed between a recomputed attention weight and the model's own.
VERIFY_TOLERANCE = 1e-4


@dataclass(frozen=True)
class Architecture:
    """What this module knows about one ``config.model_type``.

    ``kind``: module layout, "bert", "distilbert" or "gpt2"; ``pre_ln``: LayerNorm before
    attention (the head reads the normalised hidden state); ``embeddings``: what the embedding
    layer's output (``hidden_states[0]``) is made of.
    """

    kind: str
    pre_ln: bool
    embeddings: str


_BERT_EMBEDDINGS = "word + position + token-type embeddings, added (not concatenated), then LayerNorm"
ARCHITECTURES = {
    "bert": Architecture("bert", False, _BERT_EMBEDDINGS),
    "roberta": Architecture("bert", False, _BERT_EMBEDDINGS),
    "xlm-roberta": Architecture("bert", False, _BERT_EMBEDDINGS),
    "camembert": Architecture("bert", False, _BERT_EMBEDDINGS),
    "electra": Architecture("bert", False, _BERT_EMBEDDINGS),
    "distilbert": Architecture("distilbert", False, "word + position embeddings, added (not concatenated), then LayerNorm"),
    "gpt2": Architecture("gpt2", True, "word + position embeddings, added (not concatenated)"),
}
# Any model loaded with core.recording's attention: its heads are read from a recorded forward pass.
RECORDED = Architecture("recorded", True, "token embeddings only: positions enter later, as rotations of queries and keys")
# Model types that look like BERT from their module names but compute attention differently.
_LOOKALIKES = {
    "megatron-bert": "MegatronBERT applies LayerNorm before attention (pre-LN), so its heads do not read the hidden "
                     "state as BERT's do",
    "roformer": "RoFormer rotates queries and keys by their positions (rotary embeddings), which BERT's recomputation "
                "leaves out",
    "xlm-roberta-xl": "XLM-RoBERTa-XL applies LayerNorm before attention (pre-LN)",
}


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
    lower triangle including the diagonal for a decoder, a band for a sliding-window layer).

    Recorded models (``Architecture.kind == "recorded"``) also fill: ``queries_before_rotary``,
    ``keys_before_rotary`` ``[T, d]`` (None without rotary embedding; ``queries``/``keys`` are after it),
    ``kv_head`` (the key/value head this query head reads) and ``shared_with`` (every query head reading it),
    ``softcap`` (``scaled`` is then cap·tanh(scores × scale / cap)) and ``sliding_window``.
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
    queries_before_rotary: np.ndarray | None = None
    keys_before_rotary: np.ndarray | None = None
    kv_head: int | None = None
    shared_with: tuple[int, ...] = ()
    softcap: float | None = None
    sliding_window: int | None = None


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy().astype(np.float64)


def architecture(model: LoadedModel) -> Architecture:
    """What is known about ``model``'s architecture, from ``config.model_type``.

    Raises ``UnsupportedArchitecture`` (a sentence for the user) for any other model type,
    including those whose modules are named like BERT's (MegatronBERT, RoFormer).
    """
    known = ARCHITECTURES.get(model.model_type)
    if known is None and is_recordable(model.model):
        return RECORDED
    if known is None:
        why = _LOOKALIKES.get(model.model_type)
        raise UnsupportedArchitecture(
            f"Taking heads apart is not available for {model.model_type} models"
            + (f": {why}." if why else ".")
            + f" It supports {SUPPORTED}; attention weights themselves are shown for every model."
        )
    return known


def embeddings_description(model: LoadedModel) -> str:
    """What ``hidden_states[0]`` is for this model, in words (ELECTRA: with its ``embeddings_project``)."""
    text = architecture(model).embeddings
    if text == RECORDED.embeddings and getattr(model.model, "rotary_emb", None) is None:
        text = "this family's input embeddings (it has no rotary embedding)"
    project = getattr(model.model, "embeddings_project", None)
    if project is not None:
        text += (
            f", then `embeddings_project`, a linear map from the embedding size ({project.in_features}) "
            f"to the hidden size ({project.out_features})"
        )
    return text


def _block(model: LoadedModel, layer: int):
    kind = architecture(model).kind
    base = model.model
    if not 0 <= layer < model.num_layers:
        raise ValueError(f"layer must be in 0..{model.num_layers - 1}, got {layer}")
    if kind == "recorded":
        return kind, None
    try:
        if kind == "bert":
            block = base.encoder.layer[layer]
            block.attention.self.query  # noqa: B018 - the layout check
        elif kind == "distilbert":
            block = base.transformer.layer[layer]
            block.attention.q_lin  # noqa: B018
        else:
            block = base.h[layer]
            block.attn.c_attn  # noqa: B018
    except (AttributeError, IndexError, TypeError) as err:
        raise UnsupportedArchitecture(
            f"This {model.model_type} model's attention is not laid out as usual, so its heads cannot be taken apart."
        ) from err
    return kind, block


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
    if kind == "recorded":
        raise UnsupportedArchitecture(
            f"{model.model_type} heads rotate their queries and keys by position, so they are not fixed weight "
            "matrices; see `compute_head`, which reads them from a recorded forward pass."
        )
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
    if kind == "recorded":
        from core.recorded_heads import records

        return _np(records(model, analysis)[layer].inputs[0])
    x = analysis.hidden_states[layer]
    if kind == "gpt2":
        with torch.no_grad():
            x = block.ln_1(torch.from_numpy(np.array(x, dtype=np.float32)).to(model.device)).cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def _softmax_weights(q: np.ndarray, k: np.ndarray, scale: float, causal: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(scores, scaled, weights, keep)`` of one head from its queries and keys ``[T, d]``."""
    scores = q @ k.T
    t = len(q)
    keep = np.tril(np.ones((t, t), dtype=bool)) if causal else np.ones((t, t), dtype=bool)
    scaled = np.where(keep, scores * scale, -np.inf)
    exp = np.exp(scaled - scaled.max(axis=1, keepdims=True))
    return scores, scaled, exp / exp.sum(axis=1, keepdims=True), keep


def _check_against_model(model: LoadedModel, analysis: Analysis, layer: int, heads: list[int], weights: list[np.ndarray]) -> None:
    """Raise ``UnsupportedArchitecture`` when recomputed weights differ from the model's own attention."""
    if analysis.attentions is None:
        return
    worst = max(float(np.abs(w - analysis.attentions[layer, h]).max()) for h, w in zip(heads, weights, strict=True))
    if not worst <= VERIFY_TOLERANCE:  # also catches NaN
        raise UnsupportedArchitecture(
            f"Recomputing layer {layer}'s attention from {model.name}'s weights gives weights up to {worst:.2g} away "
            "from the attention the model itself returned, so this model computes attention in a way the app does not "
            "reproduce. Views built on the recomputation are not shown for it; its attention weights are."
        )


def verify_layer(model: LoadedModel, analysis: Analysis, layer: int) -> None:
    """Recompute every head of block ``layer`` and compare with ``analysis.attentions[layer]``.

    Raises ``UnsupportedArchitecture`` when any weight differs by more than ``VERIFY_TOLERANCE``;
    does nothing for an Analysis computed without attentions.
    """
    if analysis.attentions is None:
        return
    heads = list(range(model.num_heads))
    if block_kind(model) == "recorded":
        from core.recorded_heads import layer_weights

        _check_against_model(model, analysis, layer, heads, list(layer_weights(model, analysis, layer)))
        return
    x = layer_input(model, analysis, layer)
    weights = []
    for head in heads:
        w = head_weights(model, layer, head)
        weights.append(_softmax_weights(x @ w.w_q + w.b_q, x @ w.w_k + w.b_k, w.scale, analysis.is_decoder)[2])
    _check_against_model(model, analysis, layer, heads, weights)


def compute_head(model: LoadedModel, analysis: Analysis, layer: int, head: int) -> HeadComputation:
    """Recompute one head's attention step by step (see ``HeadComputation``).

    Raises ``UnsupportedArchitecture`` when the result differs from the model's own attention.
    """
    if block_kind(model) == "recorded":
        return _compute_recorded(model, analysis, layer, head)
    w = head_weights(model, layer, head)
    x = layer_input(model, analysis, layer)
    q, k, v = x @ w.w_q + w.b_q, x @ w.w_k + w.b_k, x @ w.w_v + w.b_v
    scores, scaled, weights, keep = _softmax_weights(q, k, w.scale, analysis.is_decoder)
    _check_against_model(model, analysis, layer, [head], [weights])
    return HeadComputation(layer, head, x, q, k, v, scores, scaled, weights, weights @ v, keep, w.scale)


def _compute_recorded(model: LoadedModel, analysis: Analysis, layer: int, head: int) -> HeadComputation:
    from core import recorded_heads as rh

    _block(model, layer)
    if not 0 <= head < model.num_heads:
        raise ValueError(f"head must be in 0..{model.num_heads - 1}, got {head}")
    record = rh.records(model, analysis)[layer]
    kv = head // record.kv_groups
    q, k, v = (_np(t[0, i]) for t, i in ((record.queries, head), (record.keys, kv), (record.values, kv)))
    keep = rh.keep_mask(record, len(q))
    scores, scaled = rh.logits(q, k, record, keep)
    weights = rh.softmax(scaled)
    _check_against_model(model, analysis, layer, [head], [weights])
    q0, k0 = rh.rotation(record, head)
    shared = tuple(h for h in range(model.num_heads) if h // record.kv_groups == kv)
    return HeadComputation(layer, head, _np(record.inputs[0]), q, k, v, scores, scaled, weights, weights @ v, keep,
                           record.scaling, q0, k0, kv, shared, record.softcap, record.sliding_window)


def value_vectors_through_output(model: LoadedModel, analysis: Analysis, layer: int) -> np.ndarray:
    """``[heads, T, hidden]``: f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h for every head h and token j.

    What token j would add to the output if head h gave it all its attention
    (Kobayashi et al. 2020); the shared output bias is left out. The layer's recomputed
    attention is first checked against the model's own (``verify_layer``).
    """
    verify_layer(model, analysis, layer)
    if block_kind(model) == "recorded":
        from core.recorded_heads import value_vectors_through_output as recorded

        return recorded(model, analysis, layer)
    x = layer_input(model, analysis, layer)
    out = []
    for head in range(model.num_heads):
        w = head_weights(model, layer, head)
        out.append((x @ w.w_v + w.b_v) @ w.w_o)
    return np.stack(out)
