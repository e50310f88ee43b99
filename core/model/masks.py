"""The attention masks of the recording implementation (``core.model.recording``), registered with transformers'
public mask interface (``ALL_MASK_ATTENTION_FUNCTIONS``) under its name.

Outside a long pass the mask is ``eager_mask``'s: float ``[B, 1, T, S]``, 0 where a query may attend and the dtype's
minimum elsewhere, 268 MB at 8,192 tokens. During a long pass (a ``Recorder`` with ``rows_per_chunk``, whose attention
runs a block of query rows at a time) it is the same cells as bool (True = may attend), 67 MB: ``eager_mask`` is that
bool mask (``sdpa_mask`` without the causal skip) made additive, and the attention makes each block of rows additive
the same way (``additive``) before the family's eager attention adds it. The weights are unchanged to the bit; the
mask is never skipped (None) for a causal model, since ``core.model.on_demand`` needs its cells. A ``Recorder(sdpa=True)``
pass (``core.model.trace``) gets ``sdpa_mask``'s mask, skipped where sdpa skips it (the record says ``causal``).
"""

from __future__ import annotations

import torch
from transformers.masking_utils import eager_mask, sdpa_mask


def additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A bool mask (True = may attend) as eager attention adds it: 0 or ``dtype``'s minimum, as ``eager_mask`` makes it."""
    return torch.where(mask, torch.zeros((), device=mask.device, dtype=dtype), torch.finfo(dtype).min)


def is_bool(mask: torch.Tensor | None) -> bool:
    return mask is not None and mask.dtype == torch.bool


def for_eager(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """``mask`` as the family's eager attention adds it: a long pass's bool mask made ``additive``, any other as it is."""
    return additive(mask, dtype) if is_bool(mask) else mask


def explorer_mask(*args, as_bool: bool, sdpa: bool = False, dtype: torch.dtype = torch.float32,
                  allow_is_causal_skip: bool = True, **kwargs) -> torch.Tensor | None:
    """``eager_mask(*args, dtype=dtype, **kwargs)``, or with ``as_bool`` the bool mask it is made from (``[B, 1, T, S]``;
    None only where ``eager_mask`` gives None: a bidirectional mask without padding, when allowed), or with ``sdpa``
    (a ``Recorder(sdpa=True)`` pass) ``sdpa_mask`` itself: bool, or None where torch's ``is_causal`` (or nothing)
    does the masking, as for the model's default attention."""
    if sdpa:
        return sdpa_mask(*args, allow_is_causal_skip=allow_is_causal_skip, **kwargs)
    if as_bool:
        return sdpa_mask(*args, allow_is_causal_skip=False, **kwargs)
    return eager_mask(*args, dtype=dtype, **kwargs)
