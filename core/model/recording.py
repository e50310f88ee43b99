"""Recording attention through transformers' public ``AttentionInterface``: one mechanism for every family.

Every model is loaded with ``attn_implementation=IMPLEMENTATION`` ("explorer"), registered here with
``AttentionInterface.register``. Whether a family's attention really goes through it is decided by what its modules
do: ``core.model.models.load_model`` runs a probe pass inside a ``Recorder`` and keeps the implementation only when every
layer's attention called it (``records_every_layer``); otherwise (MegatronBERT, RoFormer compute attention
themselves, GPT-Neo picks its attention class by implementation name) the model is loaded with plain eager
attention and ``is_recordable`` is False (the families that call it: docs/architecture.md).

The registered function calls the family's own ``eager_attention_forward``, so every weight is what eager attention
gives (scaling, mask, position bias, soft-cap, sliding window), or with ``Recorder(sdpa=True)`` transformers' sdpa.
Inside ``with Recorder(model) as rec:`` (per thread: a ``ContextVar``) it also keeps, for each recorded layer, a
``LayerRecord``, and it can replace one head's output before the output projection (knock-out / patching).

Calls are told apart by the module that makes them, not by ``layer_idx`` (DistilBERT has none, and an
encoder-decoder's encoder, decoder and cross-attention share the same values): a call's key is ``(stack, layer)``,
``layer`` the block number in the module's path (``encoder.layer.3.attention.self`` → 3) and ``stack`` "self" for a
model with one stack, else "encoder" (inside ``model.get_encoder()``), "decoder" (a causal module) or "cross".

Shapes (``B`` batch, ``T`` query tokens, ``S`` key tokens (= ``T`` but for cross-attention), ``Hq`` query heads,
``Hkv`` key/value heads, ``d`` head size)::

    LayerRecord.queries   [B, Hq, T, d]   after rotary embedding (and q-norm); projection biases included
    LayerRecord.keys      [B, Hkv, S, d]  after rotary embedding (and k-norm)
    LayerRecord.values    [B, Hkv, S, d]
    LayerRecord.mask      [B, 1, T, S] additive (0 = may attend, dtype minimum = masked), or None
    LayerRecord.weights   [B, Hq, T, S]   softmax weights, exactly the model's (None with keep_weights=False)
    LayerRecord.inputs    [B, T, hidden]  what the attention module read (after the block's pre-norm, if any)
    LayerRecord.cos/sin   [B, T, r] rotary tables the module received (None without rotary); r <= d
    LayerRecord.position_bias  [1, Hq, T, S] T5's relative-position bias, added to the scores (None elsewhere)
    LayerRecord.output    [B, T, Hq, d]   each head's output before the output projection (``sdpa`` records only)
    replace[(layer, head)] or replace[(stack, layer, head)]: that head's output before the output projection
        becomes zeros (None), a tensor [B, T, d], or what a function of it [B, T, d] returns (mean, per-row patch)

Example: ``with torch.inference_mode(), Recorder(loaded.model, layers={3}, replace={(5, 2): None}) as rec:
loaded.model(input_ids)`` knocks head 2 of layer 5 out in this pass only; ``rec.records[3].queries`` is ``[1, Hq, T, d]``.

``Recorder(model)`` keeps the attention modules' inputs and rotary tables through pre-hooks (``core.model.hooks``),
acting only in its thread. ``replace`` is the one way the app changes a head's output, filled by the intervention spec
(``core.model.intervention``: knock-out, mean ablation, patching); a Recorder opened inside another on the same model
keeps the outer one's replacements.
"""

from __future__ import annotations

import importlib
import weakref
from collections.abc import Callable
from contextlib import ExitStack
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch
from transformers import AttentionInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

from core.errors import PassStopped, UserFacingError
from core.model.attention_layers import SINGLE_STACK, attention_modules, cached_record_keys
from core.model.fast_attention import attention_output, causal_call
from core.model.hooks import hooked
from core.model.masks import explorer_mask, for_eager


class StopAtRecord(PassStopped):
    """Raised by the recording function at ``Recorder.stop_at``'s call, once its queries and keys are recorded."""


class UnsupportedArchitecture(UserFacingError, ValueError):
    """The model's attention is laid out in a way the app does not know. Message meant for the user."""


IMPLEMENTATION = "explorer"
_ACTIVE: ContextVar[Recorder | None] = ContextVar("explorer_recorder", default=None)
# What a head's output [B, T, d] becomes: zeros (None), a tensor, or a function of the output
Replacement = torch.Tensor | Callable[[torch.Tensor], torch.Tensor] | None


@dataclass
class LayerRecord:
    """One attention layer's call (see the module docstring for shapes)."""

    module: torch.nn.Module
    queries: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor | None  # None with Recorder(queries_keys_only=True), but at its stop_at call
    mask: torch.Tensor | None
    weights: torch.Tensor | None
    scaling: float
    softcap: float | None
    sliding_window: int | None
    inputs: torch.Tensor | None = None
    cos: torch.Tensor | None = None
    sin: torch.Tensor | None = None
    position_bias: torch.Tensor | None = None
    output: torch.Tensor | None = None
    causal: bool = False  # mask None and causal: sdpa's ``is_causal`` (core.model.fast_attention.causal_call)

    @property
    def kv_groups(self) -> int:
        """How many query heads share one key/value head."""
        return self.queries.shape[1] // self.keys.shape[1]


@dataclass
class Recorder:
    """Context manager: records ``layers`` (None = all) of forward passes of ``model`` run in this thread.

    ``records``: ``{layer: LayerRecord}`` of a model with one stack; ``stacks``: ``{stack: {layer: LayerRecord}}``
    for every stack ("self", or "encoder", "decoder" and "cross" for an encoder-decoder).
    ``replace`` maps ``(layer, head)`` of the "self" stack, or ``(stack, layer, head)``, to what that head's output
    ``[B, T, d]`` becomes: None (zeros), a tensor, or a function of the output (``Replacement``).
    ``keep_tensors=False`` records nothing (only the replacements act), for cheap knock-outs;
    ``keep_weights=False`` records everything but the attention weights (the caller has them already).
    ``queries_keys_only`` records only queries, keys, mask, scaling, soft-cap and window; ``rows_per_chunk`` runs
    each layer's eager attention that many query rows at a time, without weights (bool masks); ``shapes_only`` (with
    ``queries_keys_only``) keeps queries, keys and mask as meta tensors. ``sdpa`` computes each
    output with transformers' sdpa (``core.model.fast_attention``; eager for a soft-capped layer), with sdpa's masks.
    ``stop_at`` ``(stack, layer)``: that call's queries, keys, values and mask are recorded (as ``queries_keys_only``
    does, values added; its input and rotary tables too unless ``queries_keys_only``) and ``StopAtRecord`` is raised
    before its output is computed, so a block called for its queries and keys alone
    (``core.model.trace_layers.queries_keys``) or a pass for some layers' (``pass_queries_keys``) computes nothing after
    them.
    """

    model: torch.nn.Module | None = None
    layers: set[int] | None = None
    replace: dict[tuple, Replacement] = field(default_factory=dict)
    keep_tensors: bool = True
    keep_weights: bool = True
    queries_keys_only: bool = False
    rows_per_chunk: int | None = None
    shapes_only: bool = False
    sdpa: bool = False
    stop_at: tuple[str, int] | None = None
    records: dict[int, LayerRecord] = field(default_factory=dict)
    stacks: dict[str, dict[int, LayerRecord]] = field(default_factory=dict)
    _inputs: dict[int, tuple] = field(default_factory=dict)
    _keys: dict[int, tuple[str, int]] = field(default_factory=dict)
    _replacing: dict[tuple[str, int], dict[int, Replacement]] = field(default_factory=dict)
    _hooks: ExitStack | None = None
    _token: object = None

    def __enter__(self) -> Recorder:
        self.stacks[SINGLE_STACK] = self.records
        outer = _ACTIVE.get()
        if outer is not None and outer.model is self.model:
            self._replacing = {key: dict(heads) for key, heads in outer._replacing.items()}
        for key, new in self.replace.items():
            stack, layer, head = key if len(key) == 3 else (SINGLE_STACK, *key)
            self._replacing.setdefault((stack, int(layer)), {})[int(head)] = new
        self._hooks = ExitStack()
        if self.model is not None:
            self._keys = cached_record_keys(self.model)
            if self.keep_tensors and not self.queries_keys_only:
                self._hooks.enter_context(hooked([(m, "pre", _input_hook) for m in attention_modules(self.model)]))
        self._token = _ACTIVE.set(self)
        return self

    def __exit__(self, *exc) -> None:
        _ACTIVE.reset(self._token)
        self._hooks.close()

    def wants(self, layer: int) -> bool:
        return self.keep_tensors and (self.layers is None or layer in self.layers)

    def key_of(self, module: torch.nn.Module) -> tuple[str, int]:
        """``(stack, layer)`` of an attention module's call."""
        key = self._keys.get(id(module))
        if key is not None:
            return key
        layer = getattr(module, "layer_idx", None)  # a Recorder without its model: single-stack decoders
        if not isinstance(layer, int):
            raise RuntimeError(f"{type(module).__name__} is not inside a numbered block, so its calls cannot be told apart")
        return SINGLE_STACK, layer


_EAGER: dict[type, object] = {}


def _family_eager(module: torch.nn.Module):
    """The ``eager_attention_forward`` of the module's own family (the reference computation)."""
    eager = _EAGER.get(type(module))
    if eager is None:
        eager = getattr(importlib.import_module(type(module).__module__), "eager_attention_forward", None)
        if eager is None:
            from transformers.models.llama.modeling_llama import eager_attention_forward as eager  # noqa: PLC0415 - only for a family without an eager function
        _EAGER[type(module)] = eager
    return eager


_SOFTCAPS: weakref.WeakKeyDictionary[torch.nn.Module, float | None] = weakref.WeakKeyDictionary()


def _configured_softcap(module: torch.nn.Module) -> float | None:
    """The module's configured ``attn_logit_softcapping`` (Gemma 2), read once per module (config reads are slow)."""
    if module not in _SOFTCAPS:
        _SOFTCAPS[module] = getattr(getattr(module, "config", None), "attn_logit_softcapping", None)
    return _SOFTCAPS[module]


def explorer_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """The registered attention function: the family's eager attention, recorded when a Recorder is active."""
    rec = _ACTIVE.get()
    if rec is not None and rec.stop_at is not None and rec.key_of(module) == rec.stop_at:
        stack, layer = rec.stop_at
        found = _call_record(rec, module, query, key, attention_mask, scaling, kwargs, value)
        found.inputs, found.cos, found.sin = rec._inputs.pop(id(module), (None, None, None))  # kept unless queries_keys_only
        rec.stacks.setdefault(stack, {})[layer] = found
        raise StopAtRecord
    chunk = rec.rows_per_chunk if rec is not None else None
    if rec is not None and rec.sdpa:
        output, weights = attention_output(module, query, key, value, attention_mask, scaling, dropout,
                                           _softcap(module, kwargs), _family_eager(module), **kwargs)
    elif chunk and query.shape[2] > chunk and kwargs.get("position_bias") is None:
        output, weights = _eager_by_rows(module, query, key, value, attention_mask, scaling, dropout, chunk, **kwargs)
    else:
        output, weights = _family_eager(module)(module, query, key, value, for_eager(attention_mask, query.dtype),
                                                scaling=scaling, dropout=dropout, **kwargs)
    if rec is None:
        return output, weights
    stack, layer = rec.key_of(module)
    if rec.wants(layer):
        if rec.queries_keys_only:
            rec.stacks.setdefault(stack, {})[layer] = _call_record(rec, module, query, key, attention_mask, scaling, kwargs)
        else:
            inputs, cos, sin = rec._inputs.pop(id(module), (None, None, None))
            rec.stacks.setdefault(stack, {})[layer] = LayerRecord(
                module, query.detach(), key.detach(), value.detach(),
                None if attention_mask is None else attention_mask.detach(),
                weights.detach() if rec.keep_weights and weights is not None else None,
                float(scaling if scaling is not None else query.shape[-1] ** -0.5), _softcap(module, kwargs),
                kwargs.get("sliding_window"), inputs, cos, sin, kwargs.get("position_bias"),
                causal=causal_call(module, query, attention_mask, kwargs))
    heads = rec._replacing.get((stack, layer)) if rec._replacing else None
    if heads:
        output = output.clone()  # [B, T, Hq, d]
        for h, new in heads.items():
            if new is None:
                output[:, :, h] = 0.0
            else:
                output[:, :, h] = (new(output[:, :, h]) if callable(new) else new).to(output.dtype)
    if rec.sdpa and rec.wants(layer) and not rec.queries_keys_only:  # a trace's block call (core.model.trace_layers)
        rec.stacks[stack][layer].output = output.detach()
    return output, weights


def _softcap(module, kwargs) -> float | None:
    return _configured_softcap(module) if kwargs.get("softcap") is None else kwargs["softcap"]


def _call_record(rec: Recorder, module, query, key, attention_mask, scaling, kwargs, value=None) -> LayerRecord:
    """The record of ``queries_keys_only``: queries, keys and mask (meta tensors with ``shapes_only``), and ``value``
    where given (``stop_at``'s call: the values exist already, and cost ``1 / kv_groups`` of the queries)."""
    def kept(tensor: torch.Tensor | None) -> torch.Tensor | None:
        if tensor is None:
            return None
        return tensor.detach().to("meta") if rec.shapes_only else tensor.detach()

    return LayerRecord(module, kept(query), kept(key), kept(value), kept(attention_mask), None,
                       float(scaling if scaling is not None else query.shape[-1] ** -0.5), _softcap(module, kwargs),
                       kwargs.get("sliding_window"), position_bias=kwargs.get("position_bias"),
                       causal=causal_call(module, query, attention_mask, kwargs))


def _eager_by_rows(module, query, key, value, attention_mask, scaling, dropout, rows: int, **kwargs):
    """The family's eager attention over ``rows`` query rows at a time (each row's softmax reads only its own row,
    so the output is the same), without its weights: ``(output [B, T, Hq, d], None)``. Each block is copied out at once:
    kept for a final ``torch.cat``, they split glibc's freed blocks (up to 0.9 GB more in a layer at 8,192 tokens)."""
    eager = _family_eager(module)
    length = query.shape[2]
    output = None
    for start in range(0, length, rows):
        part = slice(start, start + rows)
        mask = attention_mask
        if mask is not None and mask.shape[-2] == length:
            mask = mask[:, :, part]
        mask = for_eager(mask, query.dtype)  # a long pass's bool mask (core.model.masks)
        block = eager(module, query[:, :, part], key, value, mask, scaling=scaling, dropout=dropout, **kwargs)[0]
        if output is None:
            output = block.new_empty((block.shape[0], length, *block.shape[2:]))
        output[:, part] = block
        del block
    return output, None


def _input_hook(module, args, kwargs):
    rec = _ACTIVE.get()
    if rec is None:
        return
    key = rec._keys.get(id(module))
    if key is None or not rec.wants(key[1]):
        return
    hidden = kwargs.get("hidden_states", args[0] if args else None)
    rope = kwargs.get("position_embeddings")
    cos, sin = rope if isinstance(rope, tuple) and len(rope) == 2 else (None, None)
    rec._inputs[id(module)] = (None if hidden is None else hidden.detach(), cos, sin)


def implementation_for(config) -> str:
    """The ``attn_implementation`` to load a model with: IMPLEMENTATION, for every class.

    Whether the class's attention really calls it is decided afterwards from what its modules do
    (``records_every_layer`` on a probe pass, in ``core.model.models.load_model``), never from a list of families.
    """
    return IMPLEMENTATION


def records_every_layer(rec: Recorder, layers: dict[str, int]) -> bool:
    """True when ``rec`` holds a record for every layer ``0 .. n-1`` of every stack in ``layers`` (``{stack: n}``),
    each with the module's input: every attention call of the pass went through the recording function."""
    return all(n > 0 and sorted(rec.stacks.get(stack, {})) == list(range(n))
               and all(r.inputs is not None for r in rec.stacks[stack].values()) for stack, n in layers.items())


def is_recordable(model: torch.nn.Module) -> bool:
    """True when ``model`` was loaded with the recording attention implementation (``load_model`` keeps it only
    for models whose every attention layer calls it)."""
    config = getattr(model, "config", None)
    return getattr(config, "_attn_implementation", None) == IMPLEMENTATION and bool(attention_modules(model))


def rotate_back(x: torch.Tensor, record: LayerRecord) -> torch.Tensor | None:
    """``x`` ``[B, H, T, d]`` before its rotary embedding, or None when the layer got no rotary tables.

    Rotary embedding is a rotation q·cos + rotate_half(q)·sin of the first ``r`` dimensions; its inverse
    is q·cos − rotate_half(q)·sin, with the family's own ``rotate_half``.
    """
    if record.cos is None or record.sin is None:
        return None
    rotate_half = getattr(importlib.import_module(type(record.module).__module__), "rotate_half", None)
    if rotate_half is None:
        return None
    cos, sin = record.cos.unsqueeze(1), record.sin.unsqueeze(1)
    r = cos.shape[-1]
    turned, passed = x[..., :r], x[..., r:]
    return torch.cat([turned * cos - rotate_half(turned) * sin, passed], dim=-1)


def _mask(*args, **kwargs):
    """The registered mask function: bool during a long pass, else eager attention's float (``core.model.masks``)."""
    rec = _ACTIVE.get()
    return explorer_mask(*args, as_bool=bool(rec and rec.rows_per_chunk), sdpa=bool(rec and rec.sdpa), **kwargs)


AttentionInterface.register(IMPLEMENTATION, explorer_attention)
ALL_MASK_ATTENTION_FUNCTIONS.register(IMPLEMENTATION, _mask)
