"""Activation patching: which activations of a clean run restore its answer inside a corrupted run.

Clean and corrupted prompts have the same number of tokens (for example "…, John gave a drink to" and
"…, Mary gave a drink to"). The metric is ``logit(answer) − logit(wrong)`` at the last position, normalised so that
0 is the corrupted run and 1 the clean run. Each cell of a grid is one corrupted run with one activation copied from
the clean run; many such runs go through the model together as one batch, each row under its own replacement of one
intervention spec (``core.model.intervention``: for one call, in the calling thread only, always removed). The clean
run's activations are read with hooks (``core.model.hooks``); the parts come from ``core.model.parts``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from transformers import DynamicCache

from core.errors import AnalysisError, UserFacingError
from core.model.hooks import hooked, main_input
from core.model.intervention import Intervention, Replace, intervened, replace_heads
from core.model.parts import ModelParts
from core.model.tokens import decoded_tokens, quoted_token
from core.outputs.causal_lm import causal_parts, encode, single_token
from core.outputs.predictions import LanguageModel

Kind = Literal["residual", "heads", "mlp"]
MAX_BATCH_TOKENS = 2048  # patched copies per forward pass = this // prompt length (memory bound, not speed)


class UnequalLengths(UserFacingError, ValueError):
    """Clean and corrupted prompts tokenise to different lengths; the message shows both tokenisations."""

    def __init__(self, clean: list[str], corrupted: list[str]):
        self.clean_tokens, self.corrupted_tokens = clean, corrupted
        super().__init__(
            f"The clean prompt is {len(clean)} tokens and the corrupted one {len(corrupted)}; patching copies "
            f"activations position by position, so both must have the same length. Clean: "
            f"{' | '.join(map(quoted_token, clean))}. Corrupted: {' | '.join(map(quoted_token, corrupted))}."
        )


@dataclass(frozen=True, eq=False)
class Patching:
    """One patching grid.

    ``grid``: ``[layers, T]`` (residual: row ``l`` = ``hidden_states[l]``, the input to block ``l``; mlp: block ``l``'s
    MLP output) or ``[layers, heads]`` (each head's output at every position), normalised (0 = corrupted, 1 = clean);
    ``raw``: the same cells as ``logit(answer) − logit(wrong)``; ``clean_diff``, ``corrupted_diff``: the two runs'
    metric; ``tokens``: the clean prompt's tokens, ``corrupted_tokens``: the corrupted prompt's.
    """

    kind: Kind
    grid: np.ndarray
    raw: np.ndarray
    clean_diff: float
    corrupted_diff: float
    tokens: list[str]
    corrupted_tokens: list[str]
    answer_id: int
    wrong_id: int

    def __post_init__(self) -> None:
        self.grid.setflags(write=False)
        self.raw.setflags(write=False)


def _decode(lm: LanguageModel, ids: torch.Tensor) -> list[str]:
    return decoded_tokens(lm.tokenizer, ids.tolist())


def _metric(logits: torch.Tensor, answer: int, wrong: int) -> torch.Tensor:
    return (logits[:, -1, answer] - logits[:, -1, wrong]).double()


def _forward(lm: LanguageModel, ids: torch.Tensor, **kwargs):
    with torch.inference_mode():
        return lm.model(input_ids=ids, logits_to_keep=1, **kwargs)


def _clean_cache(lm: LanguageModel, parts: ModelParts, ids: torch.Tensor, kind: Kind):
    """The clean run's activations ``[layers, T, width]`` that ``kind`` patches, and its logits."""
    layers = len(parts.layers)
    store: list[torch.Tensor | None] = [None] * layers
    hooks = []
    for layer, part in enumerate(parts.layers):
        if kind == "heads":
            def pre(module, args, kwargs, layer=layer):
                store[layer] = main_input(args, kwargs, "input")[0].detach().clone()
            hooks.append((part.output_projection, "pre", pre))
        elif kind == "mlp":
            def post(module, args, output, layer=layer):
                store[layer] = output[0].detach().clone()
            hooks.append((part.mlp, "post", post))
    with hooked(hooks):
        out = _forward(lm, ids[None], output_hidden_states=(kind == "residual"))
    if kind == "residual":
        return torch.stack([h[0] for h in out.hidden_states[:layers]]), out.logits
    return torch.stack(store), out.logits


def _prefix_cache(lm: LanguageModel, ids: torch.Tensor):
    """The corrupted run's key/value cache when the model returns a croppable one, else None. It records its past:
    a sliding-window layer (Gemma 3, Mistral) otherwise keeps only its window and cannot be cut back to a prefix
    once the prompt is longer."""
    cache = DynamicCache(config=lm.model.config)
    cache.activate_past_recording()
    cache = _forward(lm, ids[None], use_cache=True, past_key_values=cache).past_key_values
    return cache if cache is not None and getattr(cache, "is_croppable", False) else None


def _chunks(cells: list[tuple[int, int]], kind: Kind, length: int, prefix) -> list[tuple[int, list[int]]]:
    """``(offset, cell numbers)`` per forward pass. A residual or MLP patch at position ``t`` leaves positions
    before ``t`` as in the corrupted run (attention is causal), so with a cache those runs start at ``t``."""
    groups: dict[int, list[int]] = {}
    for n, (_, index) in enumerate(cells):
        groups.setdefault(index if prefix is not None and kind != "heads" else 0, []).append(n)
    chunks = []
    for offset, numbers in sorted(groups.items()):
        batch = max(1, MAX_BATCH_TOKENS // (length - offset))
        chunks += [(offset, numbers[i:i + batch]) for i in range(0, len(numbers), batch)]
    return chunks


def _patched_runs(lm: LanguageModel, parts: ModelParts, ids: torch.Tensor, cells: list[tuple[int, int]], cache, kind: Kind,
                  answer: int, wrong: int, progress: Callable[[int, int], None] | None) -> np.ndarray:
    """The metric of each corrupted run with cell ``(layer, index)`` patched from ``cache``, batched."""
    results = np.empty(len(cells))
    d = parts.head_dim
    prefix = _prefix_cache(lm, ids) if kind != "heads" else None
    done = 0
    for offset, numbers in _chunks(cells, kind, len(ids), prefix):
        spec = Intervention()
        for b, n in enumerate(numbers):
            layer, index = cells[n]
            if kind == "heads":  # the head's output at every position, from the clean run
                spec += replace_heads([(layer, index)], cache[layer][:, index * d:(index + 1) * d], rows=(b,))
            else:  # one position of the block's input or MLP output; this pass starts at token ``offset``
                site = "resid_pre" if kind == "residual" else "mlp_out"
                spec += Intervention((Replace(site, layer, value=cache[layer][offset:], positions=(index - offset,),
                                              rows=(b,)),))
        extra = {}
        if offset:
            past = copy.deepcopy(prefix)
            past.crop(offset - len(ids))  # a negative count: the tokens to drop
            past.batch_repeat_interleave(len(numbers))
            extra["past_key_values"] = past
        with intervened(lm.model, spec):
            logits = _forward(lm, ids[None, offset:].expand(len(numbers), -1), **extra).logits
        results[numbers] = _metric(logits, answer, wrong).cpu().numpy()
        done += len(numbers)
        if progress is not None:
            progress(done, len(cells))
    return results


def _patch(kind: Kind, lm: LanguageModel, clean: str, corrupted: str, answer: str | int, wrong: str | int,
           progress: Callable[[int, int], None] | None) -> Patching:
    parts = causal_parts(lm)
    answer_id = single_token(lm.tokenizer, answer, "answer")
    wrong_id = single_token(lm.tokenizer, wrong, "wrong token")
    clean_ids, corrupted_ids = encode(lm, clean), encode(lm, corrupted)
    if len(clean_ids) != len(corrupted_ids):
        raise UnequalLengths(_decode(lm, clean_ids), _decode(lm, corrupted_ids))
    cache, clean_logits = _clean_cache(lm, parts, clean_ids, kind)
    clean_diff = float(_metric(clean_logits, answer_id, wrong_id)[0])
    corrupted_diff = float(_metric(_forward(lm, corrupted_ids[None]).logits, answer_id, wrong_id)[0])
    if abs(clean_diff - corrupted_diff) < 1e-6:
        raise AnalysisError(
            f"logit(answer) − logit(wrong) is {clean_diff:.3f} on both prompts, so there is no difference for "
            "patching to restore; choose prompts that change the model's preference."
        )
    width = parts.heads if kind == "heads" else len(clean_ids)
    layers = len(parts.layers)
    cells = [(layer, index) for layer in range(layers) for index in range(width)]
    raw = _patched_runs(lm, parts, corrupted_ids, cells, cache, kind, answer_id, wrong_id, progress)
    raw = raw.reshape(layers, width)
    grid = (raw - corrupted_diff) / (clean_diff - corrupted_diff)
    return Patching(kind, grid, raw, clean_diff, corrupted_diff, _decode(lm, clean_ids), _decode(lm, corrupted_ids),
                    answer_id, wrong_id)


def patch_residual(lm: LanguageModel, clean: str, corrupted: str, answer: str | int, wrong: str | int, *,
                   progress: Callable[[int, int], None] | None = None) -> Patching:
    """``.grid`` ``[layers, T]``: the input to block ``l`` (``hidden_states[l]``) at position ``t`` patched from the
    clean run. ``answer``/``wrong``: single tokens (text such as " Mary", or ids)."""
    return _patch("residual", lm, clean, corrupted, answer, wrong, progress)


def patch_heads(lm: LanguageModel, clean: str, corrupted: str, answer: str | int, wrong: str | int, *,
                progress: Callable[[int, int], None] | None = None) -> Patching:
    """``.grid`` ``[layers, heads]``: one head's output (its slice of the output projection's input) patched from
    the clean run at every position."""
    return _patch("heads", lm, clean, corrupted, answer, wrong, progress)


def patch_mlps(lm: LanguageModel, clean: str, corrupted: str, answer: str | int, wrong: str | int, *,
               progress: Callable[[int, int], None] | None = None) -> Patching:
    """``.grid`` ``[layers, T]``: block ``l``'s MLP output at position ``t`` patched from the clean run."""
    return _patch("mlp", lm, clean, corrupted, answer, wrong, progress)
