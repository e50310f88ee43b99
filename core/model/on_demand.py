"""What a trace keeps of each block's call, so that any block can be called again alone (``core.model.trace``), and
the weights' arithmetic shared by every reader of recorded queries and keys.

Storing every head's ``[T, T]`` weights costs ``layers × heads × T² × 4`` bytes: 283 MB for SmolLM2-135M at 512 tokens,
18 GB at 4,096 and 72 GB at 8,192. A ``core.model.trace.Trace`` keeps instead, per layer, the arguments its block was
called with in the pass (a forward pre-hook, ``core.model.hooks.keeping_call``): the block's input is the trace's
residual stream ``residual[l]``, kept as a reference to it (``Hidden``); what is kept beside it is small: the masks (as
bool, ``StoredMask``), the rotary tables and the positions (``Stored``). ``call_argument`` gives them back as the block
is called again (``core.model.trace_layers.run_block``): the same module on the same inputs. ``eager_weights`` computes
weights in the order of operations of transformers' eager attention, so they equal the model's own.

Shapes (``L`` layers, ``T`` tokens)::

    calls[l]                  (args, kwargs) of block l's call; each tensor is ``Hidden(l)`` (residual[l],
                              with a batch axis of one) or ``Stored(i)`` (stored[i])
    stored[i]                 a tensor of the calls as the pass made it, or a ``StoredMask`` (bool, same shape)

Held for SmolLM2-135M at 4,096 tokens beside the residual stream: one 17 MB bool mask and 2 MB of rotary tables
(docs/benchmarks.md).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from dataclasses import dataclass

import numpy as np
import torch

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
    """float32 ``[Hq, Q, S]`` from ``queries`` ``[Hq, Q, d]`` and ``keys`` ``[Hkv, S, d]`` (one key head per query head,
    or grouped: query head ``h`` reads key head ``h // (Hq / Hkv)``, multiplied without copying the keys per head), in
    the order of transformers' eager attention: q·kᵀ × scaling, soft-cap (cap·tanh(x / cap)), the mask (``[Q, S]``:
    bool True = may attend, or additive, ``[Hq, Q, S]`` too), then a float32 softmax. In place where the order allows
    it, and a bool mask filled only over the key columns it blocks (a decoder's block of rows: its last ones)."""
    with torch.inference_mode():
        heads, rows, kv = queries.shape[0], queries.shape[1], keys.shape[0]
        if kv != heads:
            scores = torch.bmm(queries.reshape(kv, heads // kv * rows, -1), keys.transpose(-1, -2)).view(heads, rows, -1)
        else:
            scores = torch.matmul(queries, keys.transpose(-1, -2))
        scores.mul_(scaling)
        if softcap:
            scores = torch.tanh(scores / softcap) * softcap
        if mask is not None:
            if mask.dtype == torch.bool:
                blocked = ~mask
                columns = blocked.any(dim=0).nonzero()
                if len(columns):
                    lo, hi = int(columns[0]), int(columns[-1]) + 1
                    scores[..., lo:hi].masked_fill_(blocked[:, lo:hi], torch.finfo(scores.dtype).min)
            else:
                scores.add_(mask.to(scores.dtype))
        return torch.softmax(scores, dim=-1, dtype=torch.float32)


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@dataclass(frozen=True)
class Hidden:
    """Stands for ``residual[layer]`` of the trace (with a batch axis of one) in a kept call."""

    layer: int


@dataclass(frozen=True)
class Stored:
    """Stands for ``stored[index]`` of the trace's block stack in a kept call."""

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
    """What a trace keeps of an argument of block ``layer``'s call (its input ``hidden``): ``Hidden`` for
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
