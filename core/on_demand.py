"""Attention weights of a long text, computed when a view asks for a layer or a head instead of stored for every head.

Storing every head's ``[T, T]`` weights costs ``layers × heads × T² × 4`` bytes: 283 MB for SmolLM2-135M at 512 tokens,
18 GB at 4,096 and 72 GB at 8,192. Above ``core.inference.STORED_ATTENTION_MAX_TOKENS`` an ``Analysis`` keeps instead,
per layer, what the model's attention function received (``core.recording``): the queries (after the rotary embedding
and q-norm) and keys (after the rotary embedding and k-norm), the scaling, the soft-cap and the mask. A head's weights
are then recomputed in the order of operations of transformers' eager attention (``eager_weights``), so they equal
the model's own (sliding window, soft-cap and masks included; a query head reads key/value head
``h // (Hq / Hkv)``, transformers' ``repeat_kv``).

Shapes (``L`` layers, ``Hq`` query heads, ``Hkv`` key/value heads, ``T`` tokens, ``d`` head size), all read-only::

    queries[l]      float32 [Hq, T, d]
    keys[l]         float32 [Hkv, T, d]
    masks[k]        bool [T, T] (True = may attend) or float32 additive [T, T]; layer l uses masks[mask_of[l]],
                    none when mask_of[l] is None. Layers share a mask object (full, sliding), so few are kept.

Held for SmolLM2-135M at 4,096 tokens: queries 283 MB, keys 94 MB, one 16 MB mask (docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.recording import LayerRecord


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


def _mask_array(mask: torch.Tensor, keys: int) -> np.ndarray:
    """One text's ``[T, S]`` mask (its first ``keys`` columns, as eager attention reads it): bool (True = may attend)
    when it only allows or forbids, else float32 additive."""
    plane = mask[0, 0, :, :keys]
    if plane.dtype == torch.bool:
        return plane.cpu().numpy().copy()
    floor = torch.finfo(plane.dtype).min
    if bool(((plane == 0) | (plane == floor)).all()):
        return (plane == 0).cpu().numpy()
    return plane.float().cpu().numpy().copy()


@dataclass(frozen=True, eq=False)
class OnDemandAttention:
    """One text's recorded queries and keys, from which any layer's or head's weights are computed (module docstring)."""

    queries: tuple[np.ndarray, ...]
    keys: tuple[np.ndarray, ...]
    scaling: tuple[float, ...]
    softcap: tuple[float | None, ...]
    masks: tuple[np.ndarray, ...]
    mask_of: tuple[int | None, ...]

    @classmethod
    def from_records(cls, records: dict[int, LayerRecord]) -> OnDemandAttention:
        """Keep what ``records`` (one text's pass, every layer, batch of one) hold for the weights, nothing more."""
        layers = [records[layer] for layer in sorted(records)]
        masks: list[np.ndarray] = []
        seen: dict[tuple, int] = {}
        mask_of: list[int | None] = []
        for record in layers:
            if record.mask is None:
                mask_of.append(None)
                continue
            identity = (record.mask.data_ptr(), tuple(record.mask.shape), tuple(record.mask.stride()))
            if identity not in seen:  # the layers of one kind share one mask tensor
                array = _mask_array(record.mask, record.keys.shape[2])
                match = next((i for i, kept in enumerate(masks) if kept.dtype == array.dtype
                              and np.array_equal(kept, array)), None)
                if match is None:
                    masks.append(_frozen(array))
                    match = len(masks) - 1
                seen[identity] = match
            mask_of.append(seen[identity])
        return cls(
            queries=tuple(_frozen(r.queries[0].detach().float().contiguous().numpy()) for r in layers),
            keys=tuple(_frozen(r.keys[0].detach().float().contiguous().numpy()) for r in layers),
            scaling=tuple(float(r.scaling) for r in layers),
            softcap=tuple(float(r.softcap) if r.softcap else None for r in layers),
            masks=tuple(masks),
            mask_of=tuple(mask_of),
        )

    @property
    def num_layers(self) -> int:
        return len(self.queries)

    @property
    def num_heads(self) -> int:
        return self.queries[0].shape[0]

    @property
    def num_tokens(self) -> int:
        return self.queries[0].shape[1]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (*self.queries, *self.keys, *self.masks))

    def weights(self, layer: int, heads: list[int] | None = None, rows: slice | list[int] | None = None) -> np.ndarray:
        """float32 ``[len(heads), Q, T]``: the weights of ``heads`` (all when None) of block ``layer`` for the query
        positions ``rows`` (all ``T`` when None)."""
        if not 0 <= layer < self.num_layers:
            raise ValueError(f"layer must be in 0..{self.num_layers - 1}, got {layer}")
        heads = list(range(self.num_heads)) if heads is None else [int(h) for h in heads]
        if any(not 0 <= h < self.num_heads for h in heads):
            raise ValueError(f"heads must be in 0..{self.num_heads - 1}, got {heads}")
        rows = slice(None) if rows is None else rows
        queries, keys = self.queries[layer], self.keys[layer]
        groups = queries.shape[0] // keys.shape[0]
        # fancy indexing copies the heads asked for, so torch may share that (writable) memory
        q = torch.from_numpy(np.ascontiguousarray(queries[heads][:, rows]))
        k = torch.from_numpy(keys[[h // groups for h in heads]])
        index = self.mask_of[layer]
        mask = None if index is None else torch.from_numpy(np.array(self.masks[index][rows]))
        return eager_weights(q, k, self.scaling[layer], self.softcap[layer], mask).numpy()
