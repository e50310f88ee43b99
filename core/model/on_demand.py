"""Attention weights of a long text, computed when a view asks for a layer or a head instead of stored for every head.

Storing every head's ``[T, T]`` weights costs ``layers × heads × T² × 4`` bytes: 283 MB for SmolLM2-135M at 512 tokens,
18 GB at 4,096 and 72 GB at 8,192; keeping every layer's queries and keys instead still costs 377 MB at 4,096. Above
``core.model.inference.STORED_ATTENTION_MAX_TOKENS`` an ``Analysis`` keeps instead, per layer, the arguments its block was
called with in the pass (a forward pre-hook, ``core.model.hooks.keeping_call``). The big one, the block's input, is
``hidden_states[l]``, which the Analysis holds anyway, so it is kept as a reference to it (``Hidden``); what is kept
beside it is small: the masks (as bool, ``StoredMask``), the rotary tables and the positions (``stored``).

When a view asks for layer ``l``, its block is called again on those arguments inside
``Recorder(stop_at_attention=True)``: the same module on the same inputs, so the attention function receives the
queries (after the rotary embedding and q-norm), keys and mask the pass computed, records them and stops the block
before its attention and MLP run. The last ``MEMO_LAYERS`` layers asked for are kept (``LayerQueriesKeys``). A head's
weights are then computed in the order of operations of transformers' eager attention (``eager_weights``), so they
equal the model's own (sliding window, soft-cap and masks included; a query head reads key/value head
``h // (Hq / Hkv)``, transformers' ``repeat_kv``). No family needs code of its own: the model's own block does the work.

Shapes (``L`` layers, ``Hq`` query heads, ``Hkv`` key/value heads, ``T`` tokens, ``d`` head size)::

    blocks[l]                 str, the path of layer l's block in the model (``model.get_submodule``)
    calls[l]                  (args, kwargs) of that block's call; each tensor is ``Hidden(l)`` (hidden_states[l],
                              with a batch axis of one) or ``Stored(i)`` (stored[i])
    stored[i]                 a tensor of the calls as the pass made it, or a ``StoredMask`` (bool, same shape)
    LayerQueriesKeys.queries  float32 [Hq, T, d]
    LayerQueriesKeys.keys     float32 [Hkv, T, d]
    LayerQueriesKeys.mask     bool [T, T] (True = may attend), float32 additive [T, T], or None

Held for SmolLM2-135M at 4,096 tokens beside the hidden states: one 17 MB bool mask, 2 MB of rotary tables, and the
memo's two layers of queries and keys (25 MB) once a view has asked (docs/benchmarks.md).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import torch

from core.model.recording import AttentionReached, LayerRecord, Recorder

MEMO_LAYERS = 2  # layers whose queries and keys stay computed: a view's layer and the one before
BLOCK_CELLS = 4_000_000  # weights are computed this many cells [heads, rows, T] at a time (16 MB of float32)
MASK_MIN_CELLS = 1024  # a tensor of the calls this large that only allows or forbids is kept as bool


@functools.cache
def _libc():
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


def release_freed_memory() -> bool:
    """Return the memory the process has freed to the operating system: glibc keeps freed blocks in its heaps for
    later allocations (a long pass's transients stay resident), and ``malloc_trim(0)`` (public C API) gives back what
    it can. False where the C library has no ``malloc_trim`` (not glibc)."""
    libc = _libc()
    return bool(libc.malloc_trim(0)) if libc is not None else False


def eager_weights(queries: torch.Tensor, keys: torch.Tensor, scaling: float, softcap: float | None,
                  mask: torch.Tensor | None) -> torch.Tensor:
    """float32 ``[H, Q, S]`` from ``queries`` ``[H, Q, d]`` and ``keys`` ``[H, S, d]`` (already one key head per query
    head), in the order of transformers' eager attention: q·kᵀ × scaling, soft-cap (cap·tanh(x / cap)), the mask
    (``[Q, S]``: bool True = may attend, or additive), then a float32 softmax."""
    with torch.inference_mode():
        scores = torch.matmul(queries, keys.transpose(-1, -2)) * scaling
        if softcap:
            scores = torch.tanh(scores / softcap) * softcap
        if mask is not None:
            if mask.dtype == torch.bool:
                scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
            else:
                scores = scores + mask.to(scores.dtype)
        return torch.softmax(scores, dim=-1, dtype=torch.float32)


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


def _plane(array):
    """The ``[T, S]`` plane of a mask's first batch row and head (``[..., T, S]``)."""
    return array[(0,) * (array.ndim - 2)]


def _mask_array(mask: torch.Tensor, keys: int) -> np.ndarray:
    """One text's ``[T, S]`` mask (its first ``keys`` columns, as eager attention reads it): bool (True = may attend)
    when it only allows or forbids, else float32 additive."""
    plane = _plane(mask)[:, :keys]
    if plane.dtype == torch.bool:
        return plane.cpu().numpy().copy()
    floor = torch.finfo(plane.dtype).min
    if bool(((plane == 0) | (plane == floor)).all()):
        return (plane == 0).cpu().numpy()
    return plane.float().cpu().numpy().copy()


@dataclass(frozen=True)
class Hidden:
    """Stands for ``hidden_states[layer]`` of the analysis (with a batch axis of one) in a kept call."""

    layer: int


@dataclass(frozen=True)
class Stored:
    """Stands for ``OnDemandAttention.stored[index]`` in a kept call."""

    index: int


@dataclass(frozen=True, eq=False)
class StoredMask:
    """A tensor of the calls that only allows or forbids (a mask): ``allowed`` bool (its shape; True = may attend) and
    the ``dtype`` it had: additive (0 where allowed, the dtype's minimum elsewhere) or bool."""

    allowed: np.ndarray
    dtype: torch.dtype

    def restore(self) -> torch.Tensor:
        """The tensor the pass made, value for value."""
        if self.dtype == torch.bool:
            return torch.from_numpy(self.allowed.copy())
        forbidden = torch.from_numpy(~self.allowed)
        return torch.zeros(forbidden.shape, dtype=self.dtype).masked_fill_(forbidden, torch.finfo(self.dtype).min)


def to_stored(tensor: torch.Tensor) -> torch.Tensor | StoredMask:
    """What to keep of a tensor of a block's call: a mask as bool (a quarter of float32's bytes), else the tensor."""
    tensor = tensor.detach()
    if tensor.numel() >= MASK_MIN_CELLS and tensor.dtype == torch.bool:  # a long pass's mask: its memory, no copy
        return StoredMask(_frozen(np.ascontiguousarray(tensor.cpu().numpy())), torch.bool)
    if tensor.numel() >= MASK_MIN_CELLS and tensor.is_floating_point():
        allowed = tensor == 0
        if bool((allowed | (tensor == torch.finfo(tensor.dtype).min)).all()):
            return StoredMask(_frozen(allowed.cpu().numpy()), tensor.dtype)
    return tensor


# Module-level, not closures: a recursive closure is a reference cycle (function, cell, function), so what it reads (the
# pass's 585 MB of hidden states at 8,192 tokens, a restored mask) would stay alive until the garbage collector ran.
def keep_argument(value, hidden: torch.Tensor, layer: int, stored: list, index_of: dict[int, int]):
    """What ``OnDemandAttention`` keeps of an argument of block ``layer``'s call (its input ``hidden``): ``Hidden`` for
    the input, ``Stored(i)`` for another tensor (appended to ``stored`` once, ``index_of`` by id), containers walked."""
    if isinstance(value, torch.Tensor):
        if value is hidden or (value.shape == hidden.shape and torch.equal(value, hidden)):
            return Hidden(layer)
        if id(value) not in index_of:  # the layers share one mask, one rotary table …
            index_of[id(value)] = len(stored)
            stored.append(to_stored(value))
        return Stored(index_of[id(value)])
    if isinstance(value, (tuple, list)):
        return type(value)(keep_argument(v, hidden, layer, stored, index_of) for v in value)
    if isinstance(value, dict):
        return {key: keep_argument(v, hidden, layer, stored, index_of) for key, v in value.items()}
    return value


def call_argument(value, hidden_states: np.ndarray, stored: tuple, restored: dict[int, torch.Tensor]):
    """A kept argument as the block is called with it again: ``Hidden(l)`` a writable copy of ``hidden_states[l]``
    ``[1, T, D]``, ``Stored(i)`` ``stored[i]`` (a mask restored once per call, in ``restored``)."""
    if isinstance(value, Hidden):
        return torch.from_numpy(np.array(hidden_states[value.layer]))[None]
    if isinstance(value, Stored):
        item = stored[value.index]
        if not isinstance(item, StoredMask):
            return item
        if value.index not in restored:
            restored[value.index] = item.restore()
        return restored[value.index]
    if isinstance(value, (tuple, list)):
        return type(value)(call_argument(v, hidden_states, stored, restored) for v in value)
    if isinstance(value, dict):
        return {key: call_argument(v, hidden_states, stored, restored) for key, v in value.items()}
    return value


@dataclass(frozen=True, eq=False)
class LayerQueriesKeys:
    """One layer's queries ``[Hq, T, d]``, keys ``[Hkv, T, d]`` and mask ``[T, S]`` as its attention received them."""

    queries: np.ndarray
    keys: np.ndarray
    mask: np.ndarray | None
    scaling: float
    softcap: float | None


@dataclass(frozen=True, eq=False)
class OnDemandAttention:
    """One text's block calls, from which any layer's or head's weights are computed (module docstring)."""

    blocks: tuple[str, ...]
    calls: tuple[tuple[tuple, dict], ...]
    stored: tuple[torch.Tensor | StoredMask, ...]
    num_heads: int
    num_tokens: int
    memo: OrderedDict[int, LayerQueriesKeys] = field(default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def from_pass(cls, records: dict[int, LayerRecord], calls: list[tuple[tuple, dict]], blocks: list[str],
                  hidden_states: tuple[torch.Tensor, ...]) -> OnDemandAttention:
        """Keep what one text's pass (batch of one) needs to compute its weights again: ``calls[l]`` the arguments
        block ``l`` (at path ``blocks[l]``) was called with, ``hidden_states`` the pass's (``hidden_states[l]`` is
        block ``l``'s input: a reference to it, not a copy), ``records`` its attention calls (shapes suffice)."""
        stored: list[torch.Tensor | StoredMask] = []
        index_of: dict[int, int] = {}
        first = records[min(records)]
        return cls(
            blocks=tuple(blocks),
            calls=tuple((keep_argument(args, hidden_states[layer], layer, stored, index_of),
                         keep_argument(kwargs, hidden_states[layer], layer, stored, index_of))
                        for layer, (args, kwargs) in enumerate(calls)),
            stored=tuple(stored),
            num_heads=int(first.queries.shape[1]),
            num_tokens=int(first.queries.shape[2]),
        )

    @property
    def num_layers(self) -> int:
        return len(self.blocks)

    @property
    def nbytes(self) -> int:
        """Bytes held: the stored tensors and masks, and the memo's queries and keys (not the hidden states)."""
        masks = [s.allowed for s in self.stored if isinstance(s, StoredMask)]
        held = sum(m.nbytes for m in masks) + sum(s.nelement() * s.element_size() for s in self.stored
                                                  if isinstance(s, torch.Tensor))
        with self._lock:
            for found in self.memo.values():
                held += found.queries.nbytes + found.keys.nbytes
                if found.mask is not None and not any(np.shares_memory(found.mask, m) for m in masks):
                    held += found.mask.nbytes
        return held

    def layer(self, model: torch.nn.Module, hidden_states: np.ndarray, layer: int) -> LayerQueriesKeys:
        """Layer ``layer``'s queries, keys and mask: from the memo, or computed by calling its block of ``model``
        again on its kept arguments (``hidden_states``: the analysis's ``[L + 1, T, D]``)."""
        if not 0 <= layer < self.num_layers:
            raise ValueError(f"layer must be in 0..{self.num_layers - 1}, got {layer}")
        with self._lock:
            found = self.memo.get(layer)
            if found is not None:
                self.memo.move_to_end(layer)
                return found
        found = self._compute(model, hidden_states, layer)
        with self._lock:
            self.memo[layer] = found
            while len(self.memo) > MEMO_LAYERS:
                self.memo.popitem(last=False)
        return found

    def _compute(self, model: torch.nn.Module, hidden_states: np.ndarray, layer: int) -> LayerQueriesKeys:
        restored: dict[int, torch.Tensor] = {}
        block = model.get_submodule(self.blocks[layer])
        args, kwargs = self.calls[layer]
        with torch.inference_mode(), Recorder(model, layers={layer}, queries_keys_only=True,
                                              stop_at_attention=True) as rec:
            try:
                block(*call_argument(args, hidden_states, self.stored, restored),
                      **call_argument(kwargs, hidden_states, self.stored, restored))
            except AttentionReached:
                pass
        record = rec.records.get(layer)
        if record is None:
            raise RuntimeError(f"block {layer} did not call the recorded attention function again")
        keys = record.keys.shape[2]
        mask = None
        if record.mask is not None:  # the restored mask itself (most families pass it on): its bool plane, no copy
            same = [i for i, t in restored.items() if t.data_ptr() == record.mask.data_ptr()
                    and t.shape == record.mask.shape and t.stride() == record.mask.stride()]
            mask = _plane(self.stored[same[0]].allowed)[:, :keys] if same else _mask_array(record.mask, keys)
        return LayerQueriesKeys(
            queries=_frozen(record.queries[0].float().contiguous().numpy()),
            keys=_frozen(record.keys[0].float().contiguous().numpy()),
            mask=mask,
            scaling=float(record.scaling),
            softcap=float(record.softcap) if record.softcap else None,
        )

    def weights(self, model: torch.nn.Module, hidden_states: np.ndarray, layer: int, heads: list[int] | None = None,
                rows: slice | list[int] | None = None) -> np.ndarray:
        """float32 ``[len(heads), Q, T]``: the weights of ``heads`` (all when None) of block ``layer`` for the query
        positions ``rows`` (all ``T`` when None), computed ``BLOCK_CELLS`` cells at a time. ``model``: the torch model
        the analysis was made with; ``hidden_states``: the analysis's."""
        found = self.layer(model, hidden_states, layer)
        heads = list(range(self.num_heads)) if heads is None else [int(h) for h in heads]
        if any(not 0 <= h < self.num_heads for h in heads):
            raise ValueError(f"heads must be in 0..{self.num_heads - 1}, got {heads}")
        positions = np.arange(self.num_tokens)[slice(None) if rows is None else rows]
        groups = found.queries.shape[0] // found.keys.shape[0]
        # fancy indexing copies the heads asked for, so torch may share that (writable) memory
        queries = found.queries[heads]
        k = torch.from_numpy(found.keys[[h // groups for h in heads]])
        out = np.empty((len(heads), len(positions), k.shape[1]), dtype=np.float32)
        step = max(1, BLOCK_CELLS // max(1, len(heads) * k.shape[1]))
        for start in range(0, len(positions), step):
            part = positions[start : start + step]
            q = torch.from_numpy(np.ascontiguousarray(queries[:, part]))
            mask = None if found.mask is None else torch.from_numpy(np.array(found.mask[part]))
            out[:, start : start + len(part)] = eager_weights(q, k, found.scaling, found.softcap, mask).numpy()
        return out
