"""The first ``n`` tokens of a decoder's trace, read from a trace of a longer text: no second pass.

In a causal decoder-only model (every layer's attention causal: no token reads a later one) position ``i``'s queries,
keys, values, residual stream and head outputs depend on tokens ``0 … i`` alone, so the first ``n`` positions of a
trace of a text are the trace of the text's first ``n`` tokens (up to float rounding: the fused attention of a longer
pass may add in another order). ``prefix(trace, n)`` is that view: the residual stream and the pass's outputs are
numpy views of the longer trace's (no copy); each block's kept call has its position tensors (rotary tables, position
ids, a square mask) cut to the first ``n`` positions, and its quantities are recomputed from those when asked, as the
longer trace's are. Never for an encoder or an encoder-decoder (a token reads the tokens after it there): None.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from core.model.attention_layers import SINGLE_STACK
from core.model.models import LoadedModel
from core.model.on_demand import Stored, StoredMask
from core.model.text_limits import token_limit
from core.model.trace import StackCalls, Trace
from core.model.trace_tokens import TokenSequence
from core.model.words import text_word_ids


def prefix(trace: Trace, n: int) -> Trace | None:
    """The trace of the first ``n`` tokens of ``trace``'s text (``n`` ≤ its tokens; the trace itself when equal), or
    None where it cannot be read from ``trace``: a stack other than one causal decoder stack, an output or kept tensor
    whose position axis cannot be told apart from its other axes (a rotary table as long as it is wide)."""
    if set(trace.stacks) != {SINGLE_STACK}:
        return None
    sequence, calls = trace.tokens(SINGLE_STACK), trace.blocks[SINGLE_STACK]
    t = len(sequence)
    if not 0 < n <= t:
        raise ValueError(f"a prefix has 1 to {t} tokens, got {n}")
    if not all(info.causal or _reads_no_later_token(call, calls.stored, t)
               for info, call in zip(trace.stacks[SINGLE_STACK], calls.calls, strict=True)):
        return None
    if n == t:
        return trace
    outputs = {}
    for name, value in trace.outputs.items():
        if value.ndim == 0 or value.shape[0] != t or t in value.shape[1:]:
            return None
        outputs[name] = value[:n]
    stored = [_cut(item, t, n) for item in calls.stored]
    if any(item is None for item in stored):
        return None
    offsets, special = sequence.offsets[:n], sequence.special_mask[:n]
    cut = TokenSequence(sequence.text, sequence.tokens[:n], sequence.ids[:n], offsets, special,
                        tuple(text_word_ids(sequence.text, offsets, special.tolist())), sequence.num_input_tokens > n,
                        sequence.num_input_tokens)
    # a fresh trace (dataclasses.replace makes its computed layers and weights anew) on the same loaded model
    return replace(trace, sequences={"text": cut}, residual={SINGLE_STACK: trace.residual[SINGLE_STACK][:, :n]},
                   blocks={SINGLE_STACK: StackCalls(calls.paths, calls.calls, tuple(stored), calls.mlp_outputs)},
                   outputs=outputs)


def prefix_of_text(model: LoadedModel, longer: Trace, text: str, max_tokens: int | None) -> Trace | None:
    """``record(model, text, max_tokens=max_tokens)`` read from ``longer``, a kept trace of the same ``text`` with a
    higher limit or none, where it can be (``prefix``): a causal decoder whose tokens of ``text`` cut to
    ``max_tokens`` are the first of ``longer``'s. Else None (then record the text)."""
    if (model.is_encoder_decoder or not model.is_decoder or longer.model_name != model.name
            or set(longer.stacks) != {SINGLE_STACK} or longer.tokens(SINGLE_STACK).text != text):
        return None
    ids = tuple(model.tokenizer(text, truncation=True, max_length=token_limit(model, max_tokens))["input_ids"])
    held = longer.tokens(SINGLE_STACK).ids
    if not ids or len(ids) > len(held) or ids != held[:len(ids)]:
        return None
    return prefix(longer, len(ids))


def _reads_no_later_token(value, stored: tuple, t: int) -> bool:
    """True when a layer's kept call (``value``, walked) holds a square ``[…, T, T]`` mask and none of its square masks
    lets a token read a later one (a sliding-window decoder layer's; a causal layer without a mask has ``causal``)."""
    found = []

    def walk(item) -> None:
        if isinstance(item, Stored):
            kept = stored[item.index]
            allowed = kept.allowed if isinstance(kept, StoredMask) else kept.numpy() if kept.dtype == torch.bool else None
            if allowed is not None and allowed.shape[-2:] == (t, t):
                found.append(not np.triu(allowed, 1).any())
        elif isinstance(item, (tuple, list)):
            for part in item:
                walk(part)
        elif isinstance(item, dict):
            for part in item.values():
                walk(part)

    walk(value)
    return bool(found) and all(found)


def _cut(item, t: int, n: int):
    """A kept tensor of the calls with its position axes cut to ``n``: a square ``[…, T, T]`` mask both, another tensor
    the one axis of length ``T`` among its last two (``[…, T, d]`` rotary tables, ``[1, T]`` position ids); None
    when that axis is not clear (``T`` elsewhere, or a square tensor that is no mask)."""
    if isinstance(item, StoredMask):
        shape = item.allowed.shape
        if len(shape) < 2 or shape[-2:] != (t, t) or t in shape[:-2]:
            return None
        return StoredMask(item.allowed[..., :n, :n], item.dtype)
    if not isinstance(item, torch.Tensor):
        return None
    shape = tuple(item.shape)
    axes = [axis for axis, size in enumerate(shape) if size == t]
    if not axes:
        return item
    if len(axes) == 2 and axes == [len(shape) - 2, len(shape) - 1] and item.dtype == torch.bool:
        return item[..., :n, :n]
    if len(axes) != 1 or axes[0] < len(shape) - 2:
        return None
    return item.narrow(axes[0], 0, n)
