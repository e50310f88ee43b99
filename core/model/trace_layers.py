"""One block of a trace computed again, alone: what a ``core.model.trace.Trace`` does not keep from its pass.

A trace keeps the residual stream between blocks and the arguments each block was called with
(``core.model.on_demand.keep_argument``: the masks as bool, the rotary tables, T5's position bias, an encoder-decoder's
encoder output). ``run_block`` calls block ``l`` of the loaded model again on them (its input ``residual[l]``), inside
``Recorder(sdpa=True)`` (the pass's own attention computation) and hooks through ``core.model.hooks``: the same module
on the same inputs gives the same quantities, without a list of families. One call of an encoder-decoder's decoder
block gives its decoder self-attention and its cross-attention.

What one call gives (``LayerTrace``; ``T`` query tokens, ``S`` key tokens, ``D`` hidden size)::

    records[stack]        LayerRecord: queries [1, Hq, T, d] (after rotary and q/k-norm), keys and values
                          [1, Hkv, S, d], mask (bool or None with ``causal``), scaling, soft-cap, window,
                          position bias (T5) and output [1, T, Hq, d] (each head's output before the output projection)
                          and the attention's input, rotary tables (cos, sin) as the attention function got them
    residual_mid[stack]   float32 [T, D]: the residual stream after that attention sub-block (None where the block
                          has no point between attention and MLP, as GPT-J's parallel blocks)
    attention_output[stack]  float32 [T, D]: what that attention module returned (its output projection's result
                          where the projection is inside it; BERT's heads side by side, projected outside it)
    attention_normed[stack]  bool: a norm of the block read that attention's own output (Gemma 2/3)
    attention_sum[stack]  float32 [T, D] in a post-norm block (else None): the input of the norm after that
                          attention, the stream plus the update before it is normalised
    mlp_sum               float32 [T, D] in a post-norm block (else None): the input of the block's last norm
    mlp_output            float32 [T, D]: what the MLP's output map (``core.model.parts``) returned, or None
    mlp_input             float32 [T, F]: what that map read, the MLP's neurons (None without one)

The stream after an attention sub-block is found from the block's norms in call order: in a pre-norm block, the input
of the first norm called after that attention whose input is not the attention's own output (Llama's
``post_attention_layernorm``, GPT-2's ``ln_2``, Gemma's ``pre_feedforward_layernorm``, T5's next sub-layer's
``layer_norm``); in a post-norm block (its output is its last norm's: BERT, DistilBERT, BART) the output of the first
norm called after the attention.

``attention_weights`` computes a layer's weights from its record, as transformers' eager attention does: what
``core.model.trace.Trace.attention`` and the long-text views read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.errors import AnalysisError
from core.model.attention_layers import SINGLE_STACK, attention_modules, record_keys
from core.model.hooks import first_tensor, hooked, main_input
from core.model.models import LoadedModel
from core.model.on_demand import call_argument, eager_weights, keep_argument
from core.model.parts import is_norm, last_linear_to_hidden
from core.model.recording import LayerRecord, Recorder, StopAtRecord, is_recordable


@dataclass(frozen=True, eq=False)
class LayerTrace:
    """What one call of a block gives (module docstring)."""

    records: dict[str, LayerRecord]
    residual_mid: dict[str, np.ndarray | None]
    mlp_output: np.ndarray | None
    attention_output: dict[str, np.ndarray]
    attention_normed: dict[str, bool]
    attention_sum: dict[str, np.ndarray | None]
    mlp_sum: np.ndarray | None
    mlp_input: np.ndarray | None

    @property
    def nbytes(self) -> int:
        tensors = [t for r in self.records.values() for t in (r.queries, r.keys, r.values, r.output, r.mask,
                                                                r.position_bias, r.inputs, r.cos, r.sin) if t is not None]
        arrays = [a for a in (*self.residual_mid.values(), *self.attention_output.values(), *self.attention_sum.values(),
                              self.mlp_output, self.mlp_sum, self.mlp_input) if a is not None]
        return sum(t.nelement() * t.element_size() for t in tensors) + sum(a.nbytes for a in arrays)


def attention_weights(record: LayerRecord, heads: list[int] | None = None, rows=None, keys: slice | None = None
                      ) -> np.ndarray:
    """float32 ``[len(heads), Q, K]`` recomputed from ``record`` in the order of operations of transformers' eager
    attention: q·kᵀ × scaling, then soft-cap (cap·tanh(x / cap)), then the additive mask, then a float32 softmax.
    ``rows``: the query positions to compute (a slice or a list; all ``T`` when None); ``keys``: a slice of the key
    positions (all ``S`` when None), for a caller that knows every weight outside it is 0 (the rows' softmax runs over
    those keys alone). T5's relative-position bias (``record.position_bias``, one ``[T, S]`` per head) is added to the
    scores before the mask, as its eager attention does. A record of an sdpa pass whose mask was skipped
    (``record.causal``) gets the causal cells."""
    queries = record.queries[0].float()
    heads = list(range(queries.shape[0])) if heads is None else list(heads)
    rows = slice(None) if rows is None else rows
    s = record.keys.shape[2]
    keys = slice(0, s) if keys is None else slice(*keys.indices(s))
    q = queries[:, rows][heads]
    k = record.keys[0].float()[:, keys]
    if heads != list(range(queries.shape[0])):  # one key head per query head asked (eager_weights groups all heads)
        k = k[[h // record.kv_groups for h in heads]]
    mask = None if record.mask is None else record.mask[0, 0][rows, :s][:, keys]
    if mask is None and record.causal:  # sdpa's skipped causal mask (core.model.fast_attention): key j ≤ query i
        positions = torch.arange(queries.shape[1])[rows]
        mask = positions[:, None] >= torch.arange(s)[keys][None, :]
    if record.position_bias is not None:  # T5: added to the scores before the mask, per head
        bias = record.position_bias[0].float()
        bias = bias[heads] if bias.shape[0] > 1 else bias
        bias = bias[:, rows, :s][..., keys]
        if mask is not None:
            low = torch.finfo(torch.float32).min
            bias = bias + (torch.where(mask, 0.0, low) if mask.dtype == torch.bool else mask.float())
        mask = bias
    return eager_weights(q, k, record.scaling, record.softcap, mask).numpy()


def queries_keys(model: torch.nn.Module, block: torch.nn.Module, layer: int, call: tuple[tuple, dict],
                 residual: np.ndarray, stored: tuple, stack: str) -> LayerRecord:
    """The record of ``stack``'s attention in block ``layer`` (queries, keys, values, mask, scaling, soft-cap, window;
    no output): the block called again on its kept ``call`` as ``run_block`` does, stopped as that attention function is
    called (``Recorder.stop_at``), so nothing after the queries and keys is computed (no attention output, no MLP)."""
    args, kwargs = call
    restored: dict[int, torch.Tensor] = {}
    with (torch.inference_mode(), Recorder(model, layers={layer}, queries_keys_only=True, sdpa=True,
                                           stop_at=(stack, layer)) as rec):
        try:
            block(*call_argument(args, residual, stored, restored), **call_argument(kwargs, residual, stored, restored))
        except StopAtRecord:
            pass
    found = rec.stacks.get(stack, {}).get(layer)
    if found is None:
        raise AnalysisError(f"Block {layer} did not call its {stack} attention again, so its weights cannot be computed.")
    return found


def pass_queries_keys(model: torch.nn.Module, inputs: dict[str, torch.Tensor], layers: set[int] | None = None
                      ) -> dict[int, LayerRecord]:
    """``{layer: LayerRecord}`` of ``layers`` (None = all) of a one-stack model's attention in one pass over ``inputs``
    (a padded batch is fine): queries, keys, values, mask (sdpa's: None with ``causal`` where it skips it), the
    attention's input and rotary tables, scaling, soft-cap, window; no weights. The trace's recording pass
    (``Recorder(sdpa=True)``) stopped at the last wanted layer's attention (``Recorder.stop_at``), so no layer after
    its queries and keys runs. For texts whose queries and keys alone are read (``core.attention_heads.qk_map``)."""
    numbers = [layer for stack, layer in record_keys(model).values() if stack == SINGLE_STACK]
    last = max(layers) if layers else max(numbers, default=None)
    stop = None if last is None else (SINGLE_STACK, last)
    with torch.inference_mode(), Recorder(model, layers=layers, keep_weights=False, sdpa=True, stop_at=stop) as rec:
        try:
            model(**inputs)
        except StopAtRecord:
            pass
    return rec.records


def _sub_block(events: list, stack: str, post_norm: bool) -> tuple:
    """``(mid, sum, normed)`` of ``stack``'s attention sub-block, from the block's events in call order (module
    docstring): the stream after it, a post-norm block's sum before its norm, whether a norm read its own output."""
    start = next((i for i, e in enumerate(events) if e[0] == "attention" and e[1] == stack), None)
    if start is None:
        return None, None, False
    attention_out, normed = events[start][2], False
    for event in events[start + 1:]:
        if event[0] == "attention":
            return None, None, normed
        if event[0] != "norm":
            continue
        _, seen_in, seen_out = event
        if post_norm:
            return seen_out, seen_in, False
        if not (seen_in.shape == attention_out.shape and torch.equal(seen_in, attention_out)):
            return seen_in, None, normed
        normed = True
    return None, None, normed


def run_block(model: torch.nn.Module, block: torch.nn.Module, layer: int, call: tuple[tuple, dict],
              residual: np.ndarray, stored: tuple, mlp_output: torch.nn.Module | None,
              keys: dict[int, tuple[str, int]]) -> LayerTrace:
    """Call ``block`` (layer ``layer``) again on its kept ``call`` (``residual``: the trace's ``[L + 1, T, D]`` of its
    stack; ``stored``: the trace's kept tensors) and return what it computed. ``keys``: ``id(module) → (stack,
    layer)`` (``core.model.attention_layers.record_keys``)."""
    attentions = [m for m in attention_modules(model) if any(m is b for b in block.modules())]
    inside = {id(m) for a in attentions for m in a.modules()}
    events: list[tuple] = []
    seen: dict[str, torch.Tensor] = {}

    def attention_post(module, _args, output):
        events.append(("attention", keys[id(module)][0], first_tensor(output).detach()[0]))

    def norm_post(_module, args, kwargs, output):
        if any(e[0] == "attention" for e in events):
            events.append(("norm", main_input(args, kwargs).detach()[0], first_tensor(output).detach()[0]))

    def keep(name):
        def post(_module, _args, output):
            seen[name] = first_tensor(output).detach()[0]
        return post

    hooks = [(a, "post", attention_post) for a in attentions]
    hooks += [(m, "post_kwargs", norm_post) for m in block.modules() if id(m) not in inside and is_norm(m)]
    hooks.append((block, "post", keep("block")))
    if mlp_output is not None:
        hooks.append((mlp_output, "post", keep("mlp")))
        hooks.append((mlp_output, "pre", lambda _m, args, kwargs: seen.__setitem__(
            "neurons", main_input(args, kwargs, "input").detach()[0])))
    restored: dict[int, torch.Tensor] = {}
    args, kwargs = call
    with torch.inference_mode(), hooked(hooks), Recorder(model, layers={layer}, sdpa=True, keep_weights=False) as rec:
        block(*call_argument(args, residual, stored, restored), **call_argument(kwargs, residual, stored, restored))
    records = {}
    for stack, layers in rec.stacks.items():
        if layer in layers:
            record = layers[layer]
            records[stack] = record
    norms = [e for e in events if e[0] == "norm"]
    post_norm = bool(norms) and "block" in seen and torch.equal(norms[-1][2], seen["block"])
    found = {stack: _sub_block(events, stack, post_norm) for stack in records}
    outputs = {e[1]: e[2] for e in events if e[0] == "attention"}
    array = lambda x: None if x is None else x.float().numpy()  # noqa: E731 - one conversion for every field
    return LayerTrace(
        records=records,
        residual_mid={s: array(f[0]) for s, f in found.items()},
        mlp_output=array(seen.get("mlp")),
        attention_output={s: array(outputs[s]) for s in records},
        attention_normed={s: f[2] for s, f in found.items()},
        attention_sum={s: array(f[1]) for s, f in found.items()},
        mlp_sum=array(norms[-1][1]) if post_norm else None,
        mlp_input=array(seen.get("neurons")),
    )


class BlockKeeper:
    """The hooks of one block stack during ``core.model.trace.record``'s pass: each block's call (``keep_argument``)
    and its input copied into ``residual[l]``, the last block's output into ``residual[L]``."""

    def __init__(self, layers: int):
        self.layers = layers
        self.residual: np.ndarray | None = None
        self.calls: list = [None] * layers
        self.stored: list = []
        self.index_of: dict[int, int] = {}

    def pre(self, layer: int):
        def keep(args, kwargs):
            hidden = main_input(args, kwargs)
            if self.residual is None:
                self.residual = np.empty((self.layers + 1, *hidden.shape[1:]), dtype=np.float32)
            self.residual[layer] = hidden[0].float().numpy()
            self.calls[layer] = (keep_argument(args, hidden, layer, self.stored, self.index_of),
                                 keep_argument(kwargs, hidden, layer, self.stored, self.index_of))
        return keep

    def post(self, layer: int):
        def keep(_module, _args, output):
            if layer == self.layers - 1:
                self.residual[layer + 1] = first_tensor(output)[0].float().numpy()
        return keep


def pair_output_hooks(model: LoadedModel, found: dict[str, np.ndarray]) -> list:
    """Hooks (``core.model.hooks.hooked``) keeping in ``found`` what an encoder-decoder's pass returns no tensor for:
    ``"last_hidden_state"`` ``[T, D]``, the decoder's own output after its final norm (a seq2seq language model returns
    logits), and ``"unembedding_input"`` ``[T, D]``, what its language-model head read (None without a head)."""
    def keep(name):
        return lambda value: found.__setitem__(name, first_tensor(value)[0].float().numpy())

    hooks = [(model.model.get_decoder(), "post", lambda _m, _args, output: keep("last_hidden_state")(output[0]))]
    head = model.model.get_output_embeddings()
    if head is not None:
        hooks.append((head, "pre", lambda _m, args, kwargs: keep("unembedding_input")(main_input(args, kwargs, "input"))))
    return hooks


def block_layout(model: LoadedModel) -> dict[str, list[tuple[str, str | None]]]:
    """Per stack, per layer: ``(path of the block, path of its MLP's output map or None)``. A block is the outermost
    element of a ``ModuleList`` holding the layer's attention module (T5's ``encoder.block.3``, not its sub-layer
    ``layer.0``), so an encoder-decoder's cross-attention shares the decoder's blocks; the MLP's output map is
    ``core.model.parts.last_linear_to_hidden`` of the block. Found once per model (kept on it)."""
    base = model.model
    if not is_recordable(base):
        raise AnalysisError(f"The app does not record {model.name}'s attention, so it cannot trace it.")
    found = getattr(base, "_explorer_block_layout", None)
    if found is None:
        found = _layout(model)
        base._explorer_block_layout = found
    return found


def _layout(model: LoadedModel) -> dict[str, list[tuple[str, str | None]]]:
    base = model.model
    paths = {id(m): name for name, m in base.named_modules()}
    lists = {name for name, m in base.named_modules() if isinstance(m, torch.nn.ModuleList)}
    keys, hidden = record_keys(base), int(base.config.hidden_size)
    layout: dict[str, dict[int, tuple[str, str | None]]] = {}
    for attention in attention_modules(base):
        parts = paths[id(attention)].split(".")
        cut = next((i for i in range(1, len(parts)) if ".".join(parts[:i]) in lists), None)
        if cut is None:
            raise AnalysisError(f"{type(attention).__name__} of {model.name} is in no list of blocks the app can find.")
        block = base.get_submodule(".".join(parts[:cut + 1]))
        mlp = last_linear_to_hidden(block, attention, hidden)
        stack, layer = keys[id(attention)]
        layout.setdefault(stack, {})[layer] = (paths[id(block)], None if mlp is None else paths[id(mlp)])
    found = {stack: [layers[i] for i in sorted(layers)] for stack, layers in layout.items()}
    if "cross" in found and [p for p, _ in found["cross"]] != [p for p, _ in found.get("decoder", [])]:
        raise AnalysisError(f"{model.name}'s cross-attention is not inside its decoder's blocks, which the app reads.")
    return found
