"""Induction heads: attention from a repeated token to the token that followed its earlier occurrence.

A sequence of ``length`` random tokens is shown twice. A head that does induction, at each token of the second
repeat, attends to the token right after that token's first occurrence (Olsson et al. 2022). The scores are read
from the trace of that sequence (``core.model.trace``); ``repeat_loss`` knocks heads out, an intervention with its
own pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.errors import AnalysisError
from core.model.attention_layers import SINGLE_STACK
from core.model.intervention import intervened, replace_heads
from core.model.trace import Trace, record_ids
from core.outputs.predictions import LanguageModel, base_model_of


@dataclass(frozen=True, eq=False)
class InductionScores:
    """``scores`` ``[layers, heads]``: the mean attention from each token of the second repeat to the token after
    its earlier occurrence; ``token_ids`` ``[P + 2 * length]``: the sequence used (a prefix of ``P`` tokens, the
    beginning-of-text token when the tokenizer has one, then the two repeats); ``prefix``: ``P``."""

    scores: np.ndarray
    token_ids: np.ndarray
    prefix: int
    length: int

    def __post_init__(self) -> None:
        self.scores.setflags(write=False)
        self.token_ids.setflags(write=False)


def repeated_tokens(tokenizer, vocab_size: int, *, length: int, seed: int) -> tuple[torch.Tensor, int]:
    """``(ids [P + 2 * length], P)``: distinct random non-special tokens, twice, after the BOS token if any."""
    special = set(tokenizer.all_special_ids)
    allowed = torch.tensor([i for i in range(vocab_size) if i not in special])
    if len(allowed) < length:
        raise AnalysisError(f"The vocabulary has only {len(allowed)} ordinary tokens; choose a length up to that.")
    generator = torch.Generator().manual_seed(int(seed))
    tokens = allowed[torch.randperm(len(allowed), generator=generator)[:length]]
    prefix = [] if tokenizer.bos_token_id is None else [tokenizer.bos_token_id]
    return torch.cat([torch.tensor(prefix, dtype=torch.long), tokens, tokens]), len(prefix)


def induction_scores(model, *, length: int = 40, seed: int = 0) -> InductionScores:
    """Induction scores of every head of ``model`` (a ``LoadedModel``, or a ``LanguageModel``: its base model is read),
    from the trace of the repeated sequence (``core.model.trace.record_ids``: one pass) read by ``induction_scores_of``."""
    loaded = base_model_of(model) if isinstance(model, LanguageModel) else model
    vocab = min(int(loaded.model.config.vocab_size), len(model.tokenizer))
    ids, prefix = repeated_tokens(model.tokenizer, vocab, length=int(length), seed=seed)
    limit = getattr(model, "max_tokens", None)
    if limit is not None and len(ids) > limit:
        raise AnalysisError(f"{len(ids)} tokens is more than the model's {limit}; choose a length up to "
                            f"{(limit - prefix) // 2}.")
    return induction_scores_of(record_ids(loaded, ids), prefix=prefix, length=int(length))


def induction_scores_of(trace: Trace, *, prefix: int, length: int) -> InductionScores:
    """The induction scores read from ``trace``, the trace of a sequence of ``prefix`` tokens and then the same
    ``length`` tokens twice (``repeated_tokens``): each layer's weights of the second repeat's rows
    (``Trace.attention``), averaged in float64 over the cells from each token to the token after its first
    occurrence. Raises ``ValueError`` when the trace's tokens are not so repeated."""
    ids = np.asarray(trace.tokens(SINGLE_STACK).ids, dtype=np.int64)
    if len(ids) != prefix + 2 * length or length < 1 or not np.array_equal(ids[prefix:prefix + length], ids[prefix + length:]):
        raise ValueError(f"the trace is not of {prefix} tokens and then {length} tokens twice")
    queries = np.arange(prefix + length, prefix + 2 * length)
    keys = queries - length + 1
    scores = np.stack([trace.attention(SINGLE_STACK, layer, rows=queries)[:, np.arange(length), keys]
                       .astype(np.float64).mean(-1) for layer in range(trace.num_layers(SINGLE_STACK))])
    return InductionScores(scores, ids, int(prefix), int(length))


@dataclass(frozen=True, eq=False)
class RepeatLoss:
    """Mean next-token loss (nats) on the first and on the second repeat, with ``heads`` knocked out;
    ``first_tokens``, ``second_tokens``: float64 ``[length − 1]``, the loss of each token those means average."""

    first: float
    second: float
    heads: tuple[tuple[int, int], ...]
    first_tokens: np.ndarray | None = None
    second_tokens: np.ndarray | None = None


def repeat_loss(lm, scores: InductionScores, heads=()) -> RepeatLoss:
    """The loss of ``lm`` (a causal ``LanguageModel``) on ``scores.token_ids`` with each ``(layer, head)`` in
    ``heads`` knocked out (its output before the attention output projection set to zero: an intervention,
    ``core.model.intervention.replace_heads``)."""
    ids = torch.tensor(scores.token_ids)[None].to(lm.device)
    with intervened(lm.model, replace_heads((int(layer), int(head)) for layer, head in heads)), torch.inference_mode():
        logp = lm.model(input_ids=ids).logits[0, :-1].double().log_softmax(-1)
    loss = -logp.gather(-1, ids[0, 1:, None])[:, 0].cpu().numpy()  # loss[i]: predicting token i + 1
    p, n = scores.prefix, scores.length
    # first repeat: predicting tokens p+1 .. p+n-1; second: p+n+1 .. p+2n-1 (its first token is not predictable)
    first, second = loss[p:p + n - 1].astype(np.float64), loss[p + n:p + 2 * n - 1].astype(np.float64)
    return RepeatLoss(float(first.mean()), float(second.mean()), tuple((int(layer), int(h)) for layer, h in heads),
                      first, second)
