"""Recording attention through transformers' public ``AttentionInterface``: one mechanism for every family.

Models whose attention goes through the interface (Llama, Mistral, Qwen2/3, Gemma 1/2/3, Phi-3, SmolLM …)
are loaded with ``attn_implementation=IMPLEMENTATION`` ("explorer"). The registered function calls the
family's own ``eager_attention_forward`` (found in the module that defines the attention class), so every
weight is what eager attention gives, scaling, mask, soft-cap and sliding window included. Outside a
``Recorder`` it only does that. Inside ``with Recorder(model) as rec:`` (per thread: a ``ContextVar``) it
also keeps, for each recorded layer, a ``LayerRecord``, and it can replace one head's output before the
output projection (knock-out / patching).

Shapes (``B`` batch, ``T`` tokens, ``Hq`` query heads, ``Hkv`` key/value heads, ``d`` head size)::

    LayerRecord.queries   [B, Hq, T, d]   after rotary embedding (and q-norm)
    LayerRecord.keys      [B, Hkv, T, d]  after rotary embedding (and k-norm)
    LayerRecord.values    [B, Hkv, T, d]
    LayerRecord.mask      [B, 1, T, T] additive (0 = may attend, dtype minimum = masked), or None
    LayerRecord.weights   [B, Hq, T, T]   softmax weights, exactly the model's (None with keep_weights=False)
    LayerRecord.inputs    [B, T, hidden]  what the attention module read (after the block's pre-norm)
    LayerRecord.cos/sin   [B, T, r] rotary tables the module received (None without rotary); r <= d
    replace[(layer, head)]: None (zeros) or a tensor [B, T, d]: that head's output before the output projection

Example::

    with torch.inference_mode(), Recorder(loaded.model, layers={3}, replace={(5, 2): None}) as rec:
        loaded.model(input_ids)            # head 2 of layer 5 knocked out in this pass only
    rec.records[3].queries                 # [1, Hq, T, d]

``Recorder(model)`` installs, once per model and for good, forward pre-hooks (public API) on the attention
modules that keep their input and rotary tables; outside a Recorder they return at once. Passes in other
threads are never recorded or changed.
"""

from __future__ import annotations

import importlib
import threading
from collections import OrderedDict
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np
import torch
from transformers import AttentionInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

from core.errors import UserFacingError

class UnsupportedArchitecture(UserFacingError, ValueError):
    """The model's attention is laid out in a way the app does not know. Message meant for the user."""


IMPLEMENTATION = "explorer"
_ACTIVE: ContextVar[Recorder | None] = ContextVar("explorer_recorder", default=None)


@dataclass
class LayerRecord:
    """One attention layer's call (see the module docstring for shapes)."""

    module: torch.nn.Module
    queries: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor
    mask: torch.Tensor | None
    weights: torch.Tensor | None
    scaling: float
    softcap: float | None
    sliding_window: int | None
    inputs: torch.Tensor | None = None
    cos: torch.Tensor | None = None
    sin: torch.Tensor | None = None

    @property
    def kv_groups(self) -> int:
        """How many query heads share one key/value head."""
        return self.queries.shape[1] // self.keys.shape[1]


@dataclass
class Recorder:
    """Context manager: records ``layers`` (None = all) of forward passes of ``model`` run in this thread.

    ``replace`` maps ``(layer, head)`` to None (the head's output becomes zeros) or a ``[B, T, d]`` tensor.
    ``keep_tensors=False`` records nothing (only the replacements act), for cheap knock-outs;
    ``keep_weights=False`` records everything but the attention weights (the caller has them already).
    """

    model: torch.nn.Module | None = None
    layers: set[int] | None = None
    replace: dict[tuple[int, int], torch.Tensor | None] = field(default_factory=dict)
    keep_tensors: bool = True
    keep_weights: bool = True
    records: dict[int, LayerRecord] = field(default_factory=dict)
    _inputs: dict[int, tuple] = field(default_factory=dict)
    _token: object = None

    def __enter__(self) -> Recorder:
        if self.model is not None:
            install_input_hooks(self.model)
        self._token = _ACTIVE.set(self)
        return self

    def __exit__(self, *exc) -> None:
        _ACTIVE.reset(self._token)

    def wants(self, layer: int) -> bool:
        return self.keep_tensors and (self.layers is None or layer in self.layers)


def _layer_of(module: torch.nn.Module) -> int:
    layer = getattr(module, "layer_idx", None)
    if not isinstance(layer, int):
        raise RuntimeError(f"{type(module).__name__} has no layer_idx, so its calls cannot be told apart")
    return layer


def _family_eager(module: torch.nn.Module):
    """The ``eager_attention_forward`` of the module's own family (the reference computation)."""
    eager = getattr(importlib.import_module(type(module).__module__), "eager_attention_forward", None)
    if eager is None:
        from transformers.models.llama.modeling_llama import eager_attention_forward as eager
    return eager


def explorer_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """The registered attention function: the family's eager attention, recorded when a Recorder is active."""
    output, weights = _family_eager(module)(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    rec = _ACTIVE.get()
    if rec is None:
        return output, weights
    layer = _layer_of(module)
    if rec.wants(layer):
        softcap = kwargs.get("softcap", None)
        if softcap is None:
            softcap = getattr(getattr(module, "config", None), "attn_logit_softcapping", None)
        inputs, cos, sin = rec._inputs.pop(layer, (None, None, None))
        rec.records[layer] = LayerRecord(
            module, query.detach(), key.detach(), value.detach(),
            None if attention_mask is None else attention_mask.detach(),
            weights.detach() if rec.keep_weights and weights is not None else None,
            float(scaling if scaling is not None else module.head_dim**-0.5), softcap, kwargs.get("sliding_window"),
            inputs, cos, sin,
        )
    heads = [(h, new) for (lay, h), new in rec.replace.items() if lay == layer]
    if heads:
        output = output.clone()  # [B, T, Hq, d]
        for h, new in heads:
            output[:, :, h] = 0.0 if new is None else new.to(output.dtype)
    return output, weights


def _input_hook(module, args, kwargs):
    rec = _ACTIVE.get()
    if rec is None:
        return
    layer = _layer_of(module)
    if not rec.wants(layer):
        return
    hidden = kwargs.get("hidden_states", args[0] if args else None)
    rope = kwargs.get("position_embeddings")
    cos, sin = rope if isinstance(rope, tuple) and len(rope) == 2 else (None, None)
    rec._inputs[layer] = (None if hidden is None else hidden.detach(), cos, sin)


def attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules that call the attention interface: an ``int`` ``layer_idx`` and a ``config``."""
    return [m for m in model.modules() if isinstance(getattr(m, "layer_idx", None), int) and hasattr(m, "config")
            and type(m).__name__.endswith("Attention")]


def install_input_hooks(model: torch.nn.Module) -> None:
    """Once per model: forward pre-hooks (public API) that keep each attention module's input while recording."""
    if getattr(model, "_explorer_input_hooks", False):
        return
    for module in attention_modules(model):
        module.register_forward_pre_hook(_input_hook, with_kwargs=True)
    model._explorer_input_hooks = True


# Families whose heads core.heads already takes apart from their weights: they keep plain eager attention.
_KEEP_EAGER = frozenset({"bert", "roberta", "xlm-roberta", "camembert", "electra", "distilbert", "gpt2"})


def implementation_for(config) -> str:
    """The ``attn_implementation`` to load a model with: IMPLEMENTATION for decoders and other interface users."""
    if getattr(config, "is_encoder_decoder", False) or config.model_type in _KEEP_EAGER:
        return "eager"
    from transformers.models.auto.modeling_auto import MODEL_MAPPING

    try:
        model_class = MODEL_MAPPING[type(config)]
    except KeyError:
        return "eager"
    # a class declares whether its attention goes through the interface (GPT-Neo's does not)
    return IMPLEMENTATION if getattr(model_class, "_supports_attention_backend", False) else "eager"


def is_recordable(model: torch.nn.Module) -> bool:
    """True when ``model`` was loaded with the recording attention implementation."""
    return getattr(model.config, "_attn_implementation", None) == IMPLEMENTATION and bool(attention_modules(model))


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


AttentionInterface.register(IMPLEMENTATION, explorer_attention)
ALL_MASK_ATTENTION_FUNCTIONS.register(IMPLEMENTATION, eager_mask)


# The records of the last few single-text passes (``core.inference.analyze`` keeps them), so that taking a head
# apart needs no second forward pass. Keyed by the model object, the token ids and a fingerprint of the pass's
# result (its last hidden state): a knocked-out pass over the same ids must not stand in for the plain one.
_RECENT: OrderedDict[tuple, dict[int, LayerRecord]] = OrderedDict()
_RECENT_LOCK = threading.Lock()
RECENT_PASSES = 4


def fingerprint(last_hidden: np.ndarray) -> bytes:
    """What tells two passes over the same ids apart: the float32 bytes of the last token's last hidden state."""
    return np.ascontiguousarray(last_hidden[-1], dtype=np.float32).tobytes()


def remember(model: torch.nn.Module, input_ids: list[int], print_: bytes, records: dict[int, LayerRecord]) -> None:
    """Keep ``records`` (every layer of one pass over ``input_ids``) among the last ``RECENT_PASSES``."""
    key = (id(model), tuple(input_ids), print_)
    with _RECENT_LOCK:
        _RECENT[key] = records
        _RECENT.move_to_end(key)
        while len(_RECENT) > RECENT_PASSES:
            _RECENT.popitem(last=False)


def recall(model: torch.nn.Module, input_ids: list[int], print_: bytes) -> dict[int, LayerRecord] | None:
    """The remembered records of ``model`` on ``input_ids`` whose pass ended in ``print_``, or None."""
    with _RECENT_LOCK:
        return _RECENT.get((id(model), tuple(input_ids), print_))
