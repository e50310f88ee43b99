"""A layer's attention output at the model's own speed: transformers' ``sdpa`` integration, called by the recording
attention function (``core.model.recording``) inside ``Recorder(sdpa=True)``.

``attention_output`` hands the call to ``ALL_ATTENTION_FUNCTIONS["sdpa"]`` (transformers'
``integrations/sdpa_attention.sdpa_attention_forward``: ``torch.nn.functional.scaled_dot_product_attention`` with the
module's scaling, its grouped-query heads (``enable_gqa`` or ``repeat_kv``), the mask, ``is_causal`` where the mask
was skipped, T5's position bias folded into the mask), so the output is what the model's default forward computes,
without the weights. A call torch's fused attention cannot compute falls back to the family's eager attention: a
soft-capped one (Gemma 2's ``attn_logit_softcapping``: sdpa has no soft-cap, transformers' sdpa refuses it).

``causal_call`` says whether a call whose mask is None is causal, as the sdpa integration decides it (``is_causal``
of the call, else of the module), so the weights computed later from the recorded queries and keys apply the same
cells (``causal_mask``).
"""

from __future__ import annotations

import torch
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from core.model.masks import for_eager


def attention_output(module, query, key, value, attention_mask, scaling, dropout, capped, eager, **kwargs):
    """``(output [B, T, Hq, d], None)`` of one attention call: sdpa, or ``eager`` (the family's eager attention,
    weights dropped) for a soft-capped call (``capped``: its soft-cap, from the call or the config)."""
    if capped:  # eager adds its mask: sdpa's bool mask made additive, a skipped causal one made
        mask = attention_mask
        if mask is None and causal_call(module, query, mask, kwargs):
            mask = causal_mask(query.shape[2], key.shape[2])[None, None]
        mask = for_eager(mask, query.dtype)
        return eager(module, query, key, value, mask, scaling=scaling, dropout=dropout, **kwargs)[0], None
    kwargs.pop("softcap", None)
    return ALL_ATTENTION_FUNCTIONS["sdpa"](module, query, key, value, attention_mask, dropout=dropout,
                                           scaling=scaling, **kwargs)


def causal_call(module, query: torch.Tensor, attention_mask, kwargs: dict) -> bool:
    """True when the call (mask None) attends causally: several query rows and ``is_causal`` (the call's, else the
    module's, True when it declares nothing), as transformers' sdpa integration reads it."""
    if attention_mask is not None or query.shape[2] <= 1:
        return False
    is_causal = kwargs.get("is_causal")
    return bool(getattr(module, "is_causal", True) if is_causal is None else is_causal)


def causal_mask(rows: int, keys: int) -> torch.Tensor:
    """bool ``[rows, keys]``: True where query ``i`` may see key ``j`` (``j <= i``), sdpa's ``is_causal`` cells."""
    return torch.ones(rows, keys, dtype=torch.bool).tril()
