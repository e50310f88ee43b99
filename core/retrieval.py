"""Needle in a haystack and retrieval heads (Wu et al., 2024, "Retrieval Head Mechanistically Explains Long-Context
Factuality").

A *needle* sentence is placed at a chosen depth of a long *haystack* text, a question follows, and the *answer* is
appended (teacher-forced). At each answer token ``w`` (the query is the position just before it, the one that predicts
it), a head *copies* when the position it attends to most lies inside the needle and holds that same token ``w``. A
head's **retrieval score** is the fraction of the answer's tokens that occur in the needle which it copies. The
prompt's token ids are built piece by piece, so the needle's span is exact; ``token_ids`` is what the model read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from core.errors import AnalysisError
from core.models import threads_for_input
from core.recorded_pass import attention_weights
from core.recording import Recorder


@dataclass(frozen=True, eq=False)
class RetrievalScores:
    """``scores`` float ``[layers, heads]`` in [0, 1]; ``copies`` bool ``[layers, heads, A]`` per answer token;
    ``needle_span`` and ``answer_span``: ``(start, end)`` token positions (end excluded) in ``token_ids``;
    ``copyable`` bool ``[A]``: the answer tokens that occur in the needle (the score's denominator);
    ``answer_log_probability``: Σ log p(answer token | everything before it), teacher-forced."""

    scores: np.ndarray
    copies: np.ndarray
    needle_span: tuple[int, int]
    answer_span: tuple[int, int]
    token_ids: list[int]
    copyable: np.ndarray
    answer_log_probability: float

    @property
    def answer_probability(self) -> float:
        return float(np.exp(self.answer_log_probability))


def needle_cut(haystack: str, depth: float) -> int:
    """The character index where the needle goes: the sentence end nearest to ``depth`` (0 = start, 1 = end) of
    ``haystack`` (just after the ".", "!" or "?" that a space follows), or its start or end."""
    if not 0.0 <= depth <= 1.0:
        raise AnalysisError(f"The needle's depth must be between 0 and 1 (0 % and 100 %), not {depth}.")
    target = round(depth * len(haystack))
    ends = [0, len(haystack)] + [i + 1 for i in range(len(haystack) - 1) if haystack[i] in ".!?" and haystack[i + 1] == " "]
    return min(ends, key=lambda i: (abs(i - target), i))


def build_prompt(tokenizer, haystack: str, needle: str, question: str, answer: str,
                 depth: float) -> tuple[list[int], tuple[int, int], tuple[int, int]]:
    """``(token_ids, needle_span, answer_span)``: the tokenizer's own prefix (BOS where it adds one), the haystack up to
    the cut, the needle, the rest of the haystack, the question and the answer, each piece tokenised on its own."""
    if not needle.strip() or not answer.strip() or not question.strip():
        raise AnalysisError("Write a needle sentence, a question and its answer.")
    cut = needle_cut(haystack, depth)
    prefix = tokenizer("", add_special_tokens=True)["input_ids"]

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"] if text else []

    # spaces go before words, as byte-level tokenizers expect: "… rose." + " Needle." + " A dog …"
    before = ids(haystack[:cut])
    needle_ids = ids((" " if cut else "") + needle.strip())
    after = haystack[cut:] if cut or not haystack else " " + haystack.lstrip()
    rest = ids(after) + ids("\n\n" + question.strip())
    answer_ids = ids(answer if answer.startswith(" ") else " " + answer)
    start = len(prefix) + len(before)
    token_ids = prefix + before + needle_ids + rest + answer_ids
    return token_ids, (start, start + len(needle_ids)), (len(token_ids) - len(answer_ids), len(token_ids))


def _run(lm, token_ids: list[int], rows: list[int], replace=None):
    """One pass of ``lm`` over ``token_ids``: every layer's records (or none when ``replace`` knocks heads out) and
    the log-probabilities ``[len(rows)]`` of the token after each position in ``rows``."""
    ids = torch.tensor([token_ids], device=lm.device)
    keep = len(token_ids) - rows[0]
    with torch.inference_mode(), threads_for_input(ids.numel()), \
            Recorder(lm.model, keep_weights=False, keep_tensors=replace is None, replace=replace or {}) as rec:
        logits = lm.model(input_ids=ids, logits_to_keep=keep).logits[0].float()  # [keep, vocab]
    log_probs = torch.log_softmax(logits, dim=-1)
    picked = [float(log_probs[r - rows[0], token_ids[r + 1]]) for r in rows]
    return rec.records, np.array(picked)


def retrieval_scores(lm, haystack: str, needle: str, question: str, answer: str, depth: float) -> RetrievalScores:
    """Every head's retrieval score on one needle-in-a-haystack prompt (see the module docstring); ``lm`` a causal
    ``core.predictions.LanguageModel`` recorded through ``core.recording``."""
    token_ids, needle_span, answer_span = build_prompt(lm.tokenizer, haystack, needle, question, answer, depth)
    if len(token_ids) > lm.max_tokens:
        raise AnalysisError(f"The prompt is {len(token_ids):,} tokens, more than {lm.name}'s {lm.max_tokens:,}: "
                            "use a shorter haystack.")
    rows = list(range(answer_span[0] - 1, answer_span[1] - 1))  # each predicts the answer token after it
    records, log_probs = _run(lm, token_ids, rows)
    if not records:
        raise AnalysisError(f"{lm.name}'s attention is not recorded by the app, so its heads cannot be scored.")
    ids = np.asarray(token_ids)
    targets = ids[answer_span[0]:answer_span[1]]  # [A]
    copyable = np.isin(targets, ids[needle_span[0]:needle_span[1]])
    if not copyable.any():
        raise AnalysisError("None of the answer's tokens occurs in the needle, so no head can copy it from there: "
                            "make the answer a phrase of the needle.")
    layers = len(records)
    heads = records[0].queries.shape[1]
    copies = np.zeros((layers, heads, len(rows)), dtype=bool)
    for layer, record in sorted(records.items()):
        weights = attention_weights(record, rows=rows)  # [H, A, T]
        top = weights.argmax(axis=-1)  # [H, A]: the position each head attends to most
        inside = (top >= needle_span[0]) & (top < needle_span[1])
        copies[layer] = inside & (ids[top] == targets[None, :]) & copyable[None, :]
    scores = copies.sum(axis=-1) / copyable.sum()
    return RetrievalScores(scores, copies, needle_span, answer_span, token_ids, copyable, float(log_probs.sum()))


def answer_log_probability(lm, token_ids: Sequence[int], answer_span: tuple[int, int],
                           knocked_out: Sequence[tuple[int, int]] = ()) -> float:
    """Σ log p(answer tokens) with each ``(layer, head)`` of ``knocked_out`` zeroed before the output projection."""
    rows = list(range(answer_span[0] - 1, answer_span[1] - 1))
    _, log_probs = _run(lm, list(token_ids), rows, replace={tuple(h): None for h in knocked_out} or None)
    return float(log_probs.sum())


def top_and_random_heads(scores: np.ndarray, count: int, seed: int = 0) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """``count`` heads with the highest scores (ties by position) and as many drawn at random from the others."""
    order = np.argsort(-scores, axis=None, kind="stable")[:count]
    top = [tuple(int(x) for x in np.unravel_index(i, scores.shape)) for i in order]
    others = [(layer, head) for layer in range(scores.shape[0]) for head in range(scores.shape[1]) if (layer, head) not in top]
    rng = np.random.default_rng(seed)
    picked = rng.choice(len(others), size=min(count, len(others)), replace=False)
    return top, [others[i] for i in sorted(picked)]
