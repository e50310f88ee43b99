"""Heads of every model recorded through ``core.model.recording`` (BERT, GPT-2, Llama, Qwen, Gemma …), one code path.

What a head reads, its queries, keys and values as the attention function received them (projection biases
included, after the rotary embedding where there is one), the mask (causal, sliding window), the scaling and
Gemma 2's soft-cap all come from a recorded forward pass of the model itself, so no family needs code of its own.
Shapes: ``T`` tokens, ``d`` the head size (``config.head_dim``, not always hidden / heads), ``Hq`` query heads,
``Hkv`` key/value heads; query head ``h`` reads key/value head ``h // (Hq / Hkv)`` (transformers' ``repeat_kv``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from core.errors import AnalysisError
from core.model.analysis import Analysis
from core.model.attention_layers import SINGLE_STACK, recorded_by
from core.model.models import LoadedModel, threads_for_input
from core.model.parts import parts_of
from core.model.recording import LayerRecord, Recorder, rotate_back


def records(model: LoadedModel, analysis: Analysis) -> Mapping[int, LayerRecord]:
    """Every layer's ``LayerRecord`` for ``analysis``'s tokens: those of its own trace (``analysis.recorded``, each
    layer computed when read), else (an analysis from a batch of texts, or from an earlier load of this model) one
    recorded pass, not kept."""
    found = analysis.recorded
    if found is not None and len(found) == model.num_layers:
        try:
            if recorded_by(model.model, [found[0]]):
                return found
        except AnalysisError:  # the trace's model was loaded again since: its blocks are gone
            pass
    ids = torch.tensor([analysis.input_ids], device=model.device)
    with torch.inference_mode(), threads_for_input(ids.numel()), Recorder(model.model, keep_weights=False) as rec:
        model.model(input_ids=ids, attention_mask=torch.ones_like(ids))
    return rec.records


def attention_record(model: LoadedModel, analysis: Analysis, layer: int) -> LayerRecord:
    """Block ``layer``'s queries, keys, values, mask, scaling and soft-cap for ``analysis``'s tokens: from its trace
    with the block called only up to its attention (``core.model.trace.Trace.attention_record``: no output, no MLP),
    else ``records(model, analysis)[layer]``. The same tensors either way."""
    trace = analysis.trace
    if trace is not None and trace.model_name == model.name and SINGLE_STACK in trace.stacks:
        try:
            record = trace.attention_record(SINGLE_STACK, layer)
        except AnalysisError:  # the trace's model was loaded again since: its blocks are gone
            record = None
        if record is not None and record.values is not None and recorded_by(model.model, [record]):
            return record
    return records(model, analysis)[layer]


def as_float64(t: torch.Tensor) -> np.ndarray:
    """A recorded tensor as a float64 array, the precision every head is taken apart in."""
    return t.detach().float().cpu().numpy().astype(np.float64)


def kv_head_of(model: LoadedModel, head: int) -> int:
    """The key/value head query head ``head`` reads."""
    return head // (model.num_heads // kv_heads(model))


def kv_heads(model: LoadedModel) -> int:
    """How many key/value heads each layer has (= query heads without grouped-query attention)."""
    n = getattr(model.model.config, "num_key_value_heads", None)
    return int(n) if isinstance(n, int) and n > 0 else model.num_heads


def sharing_groups(model: LoadedModel) -> list[list[int]]:
    """For each key/value head, the query heads that share it: ``[[0, 1, 2], [3, 4, 5], …]``."""
    per = model.num_heads // kv_heads(model)
    return [list(range(g * per, (g + 1) * per)) for g in range(kv_heads(model))]


def keep_mask(record: LayerRecord, t: int, s: int | None = None) -> np.ndarray:
    """bool ``[T, S]`` (``S`` = ``T`` when None; cross-attention's source keys otherwise): True where a query may look
    at a key (the recorded additive mask is 0 there)."""
    s = t if s is None else s
    if record.mask is None:  # none, or sdpa's skipped causal mask (a trace's record: ``record.causal``)
        return np.tril(np.ones((t, s), dtype=bool)) if record.causal else np.ones((t, s), dtype=bool)
    mask = record.mask[0, 0, :t, :s]
    if mask.dtype == torch.bool:
        return mask.cpu().numpy()
    return (mask > torch.finfo(mask.dtype).min / 2).cpu().numpy()


def logits(q: np.ndarray, k: np.ndarray, record: LayerRecord, keep: np.ndarray,
           bias: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(scores, scaled)``: q·k, and ``scaled_scores`` of it (``[..., T, S]``)."""
    scores = q @ np.swapaxes(k, -1, -2)
    return scores, scaled_scores(scores, record, keep, bias=bias)


def scaled_scores(scores: np.ndarray, record: LayerRecord, keep: np.ndarray, out: np.ndarray | None = None,
                  bias: np.ndarray | None = None) -> np.ndarray:
    """``scores`` × scaling, soft-capped (cap·tanh(x / cap)) if the layer caps, plus ``bias`` (T5's relative-position
    bias, as its eager attention adds it), masked cells -inf; into ``out`` (which may be ``scores`` itself), else a new
    array."""
    scaled = np.multiply(scores, record.scaling, out=out)
    if record.softcap:
        scaled /= record.softcap
        np.tanh(scaled, out=scaled)
        scaled *= record.softcap
    if bias is not None:
        scaled += bias
    np.copyto(scaled, -np.inf, where=~keep)
    return scaled


def softmax(scaled: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The softmax over the last axis; into ``out`` (which may be ``scaled`` itself), else a new array."""
    exp = np.subtract(scaled, scaled.max(axis=-1, keepdims=True), out=out)
    np.exp(exp, out=exp)
    exp /= exp.sum(axis=-1, keepdims=True)
    return exp


def layer_weights(model: LoadedModel, analysis: Analysis, layer: int) -> np.ndarray:
    """``[Hq, T, T]`` recomputed from the recorded queries and keys (float64): ``scaled_scores`` and ``softmax`` in place,
    each key/value head's query heads in one product (no repeated keys)."""
    record = attention_record(model, analysis, layer)
    q, k = as_float64(record.queries[0]), as_float64(record.keys[0])  # [Hq, T, d], [Hkv, S, d]
    heads, t = q.shape[0], q.shape[1]
    scores = (q.reshape(k.shape[0], -1, q.shape[2]) @ np.swapaxes(k, -1, -2)).reshape(heads, t, k.shape[1])
    return softmax(scaled_scores(scores, record, keep_mask(record, t), out=scores), out=scores)


def rotation(record: LayerRecord, head: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(queries, keys)`` ``[T, d]`` of ``head`` before the rotary embedding, or ``(None, None)`` without one."""
    q, k = rotate_back(record.queries, record), rotate_back(record.keys, record)
    if q is None or k is None:
        return None, None
    return as_float64(q[0, head]), as_float64(k[0, head // record.kv_groups])


def output_matrix(projection: torch.nn.Module) -> np.ndarray:
    """``[Hq * d, hidden]``: the projection as ``x @ W`` (``nn.Linear`` keeps ``[out, in]``, ``Conv1D`` ``[in, out]``)."""
    weight = as_float64(projection.weight)
    return weight.T if isinstance(projection, torch.nn.Linear) else weight


def value_vectors_through_output(model: LoadedModel, analysis: Analysis, layer: int) -> np.ndarray:
    """``[Hq, T, hidden]``: f_h(x_j) = v_j^{kv(h)} W_O^h, the value of the key/value head ``h`` shares."""
    record = attention_record(model, analysis, layer)
    d = record.queries.shape[3]
    w_o = output_matrix(parts_of(model.model).layers[layer].output_projection)  # [Hq * d, hidden]
    values = as_float64(record.values[0])  # [Hkv, T, d]
    return np.stack([values[h // record.kv_groups] @ w_o[h * d:(h + 1) * d] for h in range(record.queries.shape[1])])


def value_norms(model: LoadedModel, analysis: Analysis, layer: int) -> np.ndarray:
    """float64 ``[Hq, T]``: ‖f_h(x_j)‖, the lengths of ``value_vectors_through_output``, as √(v_j G_h v_jᵀ) with
    G_h = W_O^h W_O^hᵀ (``d × d``), without forming each ``hidden``-long vector."""
    record = attention_record(model, analysis, layer)
    d = record.queries.shape[3]
    w_o = output_matrix(parts_of(model.model).layers[layer].output_projection)  # [Hq * d, hidden]
    values = as_float64(record.values[0])  # [Hkv, T, d]
    norms = np.empty((record.queries.shape[1], values.shape[1]))
    for h in range(len(norms)):
        part, v = w_o[h * d:(h + 1) * d], values[h // record.kv_groups]
        np.sqrt(np.maximum(np.einsum("td,td->t", v @ (part @ part.T), v), 0.0), out=norms[h])
    return norms


def norm_before_attention(model: LoadedModel, layer: int) -> str | None:
    """The name of block ``layer``'s norm before attention (``input_layernorm``), or None when it has none by that name."""
    blocks = getattr(model.model, "layers", None)
    if blocks is None or not 0 <= layer < len(blocks):
        return None
    return "input_layernorm" if isinstance(getattr(blocks[layer], "input_layernorm", None), torch.nn.Module) else None
