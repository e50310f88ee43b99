"""Needle in a haystack and retrieval heads (Wu et al., 2024, "Retrieval Head Mechanistically Explains Long-Context
Factuality").

A *needle* sentence is placed at a chosen depth of a long *haystack* text, a question follows, and the *answer* is
appended (teacher-forced). At each answer token ``w`` (the query is the position just before it, the one that predicts
it), a head *copies* when the position it attends to most lies inside the needle and holds that same token ``w``. A
head's **retrieval score** is the fraction of the answer's tokens that occur in the needle which it copies. The
prompt's token ids are built piece by piece, so the needle's span is exact; ``token_ids`` is what the model read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from core.errors import AnalysisError
from core.model.attention_layers import SINGLE_STACK
from core.model.intervention import intervened, replace_heads
from core.model.models import threads_for_input
from core.model.recording import is_recordable
from core.model.trace import Trace, record_ids
from core.outputs.generation import greedy_ids
from core.outputs.lens import output_head
from core.outputs.predictions import base_model_of

HAYSTACK_FILE = Path(__file__).parent.parent / "data" / "haystack_alice.txt"
HAYSTACK_SOURCE = ("Lewis Carroll, *Alice's Adventures in Wonderland* (1865), chapters I–III: public domain; the text of "
                   "Project Gutenberg eBook #11, as shipped in the examples of the wordcloud package's source on PyPI")

# A needle and a question that SmolLM2-135M-Instruct answers: the question ends as a cloze, which a small model
# completes far more often than a bare question (p(" purple basil") was 3e-7 after the question alone; 0.19 with the
# cloze, 256 tokens, the needle at 50 %)
DEFAULT_NEEDLE = "The secret ingredient of the lighthouse soup is purple basil."
DEFAULT_QUESTION = "What is the secret ingredient of the lighthouse soup? The secret ingredient is"
DEFAULT_ANSWER = "purple basil"


@lru_cache(maxsize=1)
def bundled_haystack() -> str:
    """The bundled haystack text (``HAYSTACK_SOURCE``; about 31,000 characters, paragraphs separated by blank lines),
    without its file's ``#`` header."""
    lines = HAYSTACK_FILE.read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.startswith("#")).strip()


def _sentence_ends(text: str) -> list[int]:
    """Every index just after a ".", "!" or "?" that whitespace or the end follows, ascending."""
    return [i + 1 for i, c in enumerate(text) if c in ".!?" and (i + 1 == len(text) or text[i + 1].isspace())]


def haystack_of_length(tokenizer, haystack: str, tokens: int) -> str:
    """The longest start of ``haystack`` that ends a sentence and is at most ``tokens`` tokens (the whole text if it
    is that short)."""
    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    if count(haystack) <= tokens:
        return haystack
    ends = _sentence_ends(haystack)
    low, high = 0, len(ends)  # ends[:low] fit; ends[high:] do not
    while low < high:
        middle = (low + high) // 2
        if count(haystack[:ends[middle]]) <= tokens:
            low = middle + 1
        else:
            high = middle
    if low == 0:
        raise AnalysisError(f"The haystack's first sentence is longer than {tokens:,} tokens: choose a longer length.")
    return haystack[:ends[low - 1]]


@dataclass(frozen=True, eq=False)
class RetrievalScores:
    """``scores`` float ``[layers, heads]`` in [0, 1]; ``copies`` bool ``[layers, heads, A]`` per answer token;
    ``needle_span`` and ``answer_span``: ``(start, end)`` token positions (end excluded) in ``token_ids``;
    ``copyable`` bool ``[A]``: the answer tokens that occur in the needle (the score's denominator);
    ``answer_log_probability``: Σ log p(answer token | everything before it), teacher-forced; ``needle_depth`` and
    ``at_sentence_end``: where the needle went (``NeedlePrompt``)."""

    scores: np.ndarray
    copies: np.ndarray
    needle_span: tuple[int, int]
    answer_span: tuple[int, int]
    token_ids: list[int]
    copyable: np.ndarray
    answer_log_probability: float
    needle_depth: float = float("nan")
    at_sentence_end: bool = True

    @property
    def answer_probability(self) -> float:
        return float(np.exp(self.answer_log_probability))

    @property
    def prompt_ids(self) -> list[int]:
        """The prompt without the appended answer: what the model answers."""
        return self.token_ids[:self.answer_span[0]]


# A needle goes at a sentence end when one lies within this share of the haystack's characters of the depth asked;
# else at the nearest word boundary. A short haystack has few sentence ends: the bundled text cut to 256 SmolLM2 tokens
# (776 characters) has three, at characters 10 ("CHAPTER I."), 625 and 767, so 25 % and 50 % went to the same one.
SENTENCE_END_REACH = 0.03


@dataclass(frozen=True)
class NeedlePlace:
    """Where ``needle_place`` puts the needle: ``cut`` the character index in the haystack; ``at_sentence_end``:
    just after a sentence or at the haystack's start or end (else at a word boundary)."""

    cut: int
    at_sentence_end: bool


def needle_place(haystack: str, depth: float) -> NeedlePlace:
    """Where the needle goes for ``depth`` (0 = start, 1 = end) of ``haystack``: the sentence end (a ".", "!" or "?"
    that whitespace follows; the haystack's start and end count as ends) nearest to ``depth × len(haystack)`` when one
    lies within ``SENTENCE_END_REACH`` of the haystack's length, else the word boundary nearest to it (the first
    whitespace after a word)."""
    if not 0.0 <= depth <= 1.0:
        raise AnalysisError(f"The needle's depth must be between 0 and 1 (0 % and 100 %), not {depth}.")
    target = depth * len(haystack)
    ends = [0, len(haystack)] + [i for i in _sentence_ends(haystack) if i < len(haystack)]
    nearest = min(ends, key=lambda i: (abs(i - target), i))
    if abs(nearest - target) <= SENTENCE_END_REACH * len(haystack):
        return NeedlePlace(nearest, True)
    words = [0, len(haystack)] + [i for i in range(1, len(haystack)) if haystack[i].isspace() and not haystack[i - 1].isspace()]
    cut = min(words, key=lambda i: (abs(i - target), i))
    return NeedlePlace(cut, False)


def needle_cut(haystack: str, depth: float) -> int:
    """The character index where the needle goes (``needle_place``)."""
    return needle_place(haystack, depth).cut


@dataclass(frozen=True)
class NeedlePrompt:
    """What ``build_prompt`` makes: ``token_ids``; ``needle_span`` and ``answer_span`` (start, end excluded);
    ``depth``: the needle's place as the share of the haystack's tokens before it; ``at_sentence_end``
    (``NeedlePlace``)."""

    token_ids: list[int]
    needle_span: tuple[int, int]
    answer_span: tuple[int, int]
    depth: float
    at_sentence_end: bool


def build_prompt(tokenizer, haystack: str, needle: str, question: str, answer: str, depth: float) -> NeedlePrompt:
    """The tokenizer's own prefix (BOS where it adds one), the haystack up to the needle's place (``needle_place``),
    the needle, the rest of the haystack, the question and the answer, each piece tokenised on its own."""
    if not needle.strip() or not answer.strip() or not question.strip():
        raise AnalysisError("Write a needle sentence, a question and its answer.")
    place = needle_place(haystack, depth)
    cut = place.cut
    prefix = tokenizer("", add_special_tokens=True)["input_ids"]

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"] if text else []

    # spaces go before words, as byte-level tokenizers expect: "… rose." + " Needle." + " A dog …"
    before = ids(haystack[:cut])
    needle_ids = ids((" " if cut else "") + needle.strip())
    after = ids(haystack[cut:] if cut or not haystack else " " + haystack.lstrip())
    rest = after + ids("\n\n" + question.strip())
    answer_ids = ids(answer if answer.startswith(" ") else " " + answer)
    start = len(prefix) + len(before)
    token_ids = prefix + before + needle_ids + rest + answer_ids
    placed = len(before) / max(1, len(before) + len(after))
    return NeedlePrompt(token_ids, (start, start + len(needle_ids)), (len(token_ids) - len(answer_ids), len(token_ids)),
                        placed, place.at_sentence_end)


def _run(lm, token_ids: list[int], rows: list[int], knocked_out: Sequence[tuple[int, int]] = ()):
    """One pass of ``lm`` over ``token_ids`` with the heads ``knocked_out`` (an intervention,
    ``core.model.intervention.replace_heads``), nothing kept: the log-probabilities ``[len(rows)]`` of the token after
    each position in ``rows``."""
    ids = torch.tensor([token_ids], device=lm.device)
    keep = len(token_ids) - rows[0]
    with torch.inference_mode(), threads_for_input(ids.numel()), intervened(lm.model, replace_heads(knocked_out)):
        logits = lm.model(input_ids=ids, logits_to_keep=keep).logits[0].float()  # [keep, vocab]
    log_probs = torch.log_softmax(logits, dim=-1)
    picked = [float(log_probs[r - rows[0], token_ids[r + 1]]) for r in rows]
    return np.array(picked)


def _answer_log_probs(lm, trace: Trace, token_ids: list[int], rows: list[int]) -> np.ndarray:
    """log p(token after each of ``rows``) ``[len(rows)]``: the model's own head (``core.outputs.lens.output_head``, the
    logit lens's: its output embeddings and, Gemma 2, its logit soft-cap) on the trace's last hidden state (after the
    final norm) at those rows alone."""
    hidden = torch.from_numpy(np.array(trace.outputs["last_hidden_state"][rows])).to(lm.device)
    with torch.inference_mode():
        logits = output_head(lm)(hidden, True).float()  # [A, vocab]
        log_probs = torch.log_softmax(logits, dim=-1)
    return np.array([float(log_probs[i, token_ids[r + 1]]) for i, r in enumerate(rows)])


def retrieval_scores(lm, haystack: str, needle: str, question: str, answer: str, depth: float) -> RetrievalScores:
    """Every head's retrieval score on one needle-in-a-haystack prompt (see the module docstring); ``lm`` a causal
    ``core.outputs.predictions.LanguageModel`` recorded through ``core.model.recording``. The prompt's trace
    (``core.model.trace.record_ids``: one pass at the model's own speed); each layer's weights for the answer's
    rows alone from its queries and keys (``Trace.attention``); the answer's probability from the trace's last hidden
    state at those rows."""
    prompt = build_prompt(lm.tokenizer, haystack, needle, question, answer, depth)
    token_ids, needle_span, answer_span = prompt.token_ids, prompt.needle_span, prompt.answer_span
    if len(token_ids) > lm.max_tokens:
        raise AnalysisError(f"The prompt is {len(token_ids):,} tokens, more than {lm.name}'s {lm.max_tokens:,}: "
                            "use a shorter haystack.")
    rows = list(range(answer_span[0] - 1, answer_span[1] - 1))  # each predicts the answer token after it
    if not is_recordable(lm.model.base_model):
        raise AnalysisError(f"{lm.name}'s attention is not recorded by the app, so its heads cannot be scored.")
    trace = record_ids(base_model_of(lm), token_ids)
    log_probs = _answer_log_probs(lm, trace, token_ids, rows)
    ids = np.asarray(token_ids)
    targets = ids[answer_span[0]:answer_span[1]]  # [A]
    copyable = np.isin(targets, ids[needle_span[0]:needle_span[1]])
    if not copyable.any():
        raise AnalysisError("None of the answer's tokens occurs in the needle, so no head can copy it from there: "
                            "make the answer a phrase of the needle.")
    layers = trace.num_layers(SINGLE_STACK)
    copies = np.zeros((layers, trace.layer_info(SINGLE_STACK, 0).heads, len(rows)), dtype=bool)
    for layer in range(layers):
        weights = trace.attention(SINGLE_STACK, layer, rows=rows)  # [H, A, T]: these rows alone, from its queries and keys
        top = weights.argmax(axis=-1)  # [H, A]: the position each head attends to most
        inside = (top >= needle_span[0]) & (top < needle_span[1])
        copies[layer] = inside & (ids[top] == targets[None, :]) & copyable[None, :]
    scores = copies.sum(axis=-1) / copyable.sum()
    return RetrievalScores(scores, copies, needle_span, answer_span, token_ids, copyable, float(log_probs.sum()),
                           prompt.depth, prompt.at_sentence_end)


def answer_log_probability(lm, token_ids: Sequence[int], answer_span: tuple[int, int],
                           knocked_out: Sequence[tuple[int, int]] = ()) -> float:
    """Σ log p(answer tokens) with each ``(layer, head)`` of ``knocked_out`` zeroed before the output projection."""
    rows = list(range(answer_span[0] - 1, answer_span[1] - 1))
    log_probs = _run(lm, list(token_ids), rows, knocked_out)
    return float(log_probs.sum())


MIN_ANSWER_STEPS = 12  # the model writes at least this many tokens …
ANSWER_STEPS_BEYOND = 4  # … and at least this many more than the expected answer has


@dataclass(frozen=True)
class ModelAnswer:
    """The model's greedy answer: ``text`` decoded, ``tokens`` written, ``cut``: it stopped at the step limit (or the
    model's window), not at its end-of-text token."""

    text: str
    tokens: int
    cut: bool


def answer_steps(answer_tokens: int) -> int:
    """How many tokens the model may write for an expected answer of ``answer_tokens`` tokens: enough to write it
    whole and a few more (``MIN_ANSWER_STEPS``, ``ANSWER_STEPS_BEYOND``)."""
    return max(MIN_ANSWER_STEPS, answer_tokens + ANSWER_STEPS_BEYOND)


def model_answer(lm, prompt_ids: Sequence[int], answer_tokens: int = 0, steps: int | None = None) -> ModelAnswer:
    """The model's own greedy answer to ``prompt_ids`` (``RetrievalScores.prompt_ids``): up to ``steps`` tokens
    (``answer_steps(answer_tokens)`` by default), ending at its end-of-text token."""
    steps = answer_steps(answer_tokens) if steps is None else steps
    ids = torch.tensor(list(prompt_ids), device=lm.device)
    with threads_for_input(ids.numel()):
        written = greedy_ids(lm, ids, steps=steps)
    ended = bool(written) and written[-1] == lm.tokenizer.eos_token_id
    text = lm.tokenizer.decode(written, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    return ModelAnswer(text, len(written), not ended)


def contains_answer(text: str, answer: str) -> bool:
    """Whether ``text`` holds ``answer`` (case and surrounding spaces ignored)."""
    return answer.strip().casefold() in text.casefold()


def top_and_random_heads(scores: np.ndarray, count: int, seed: int = 0) -> tuple[list[tuple[int, int]], list[tuple[int, int]], bool]:
    """``count`` heads with the highest scores (ties by position) and as many drawn at random from the heads that
    copy nothing (score 0), as Wu et al. draw their control heads; the third item is False when fewer than ``count``
    heads score 0, and the draw is then from every head not in the top."""
    order = np.argsort(-scores, axis=None, kind="stable")[:count]
    top = [tuple(int(x) for x in np.unravel_index(i, scores.shape)) for i in order]
    every = [(layer, head) for layer in range(scores.shape[0]) for head in range(scores.shape[1])]
    silent = [h for h in every if scores[h] == 0 and h not in top]
    only_silent = len(silent) >= count
    others = silent if only_silent else [h for h in every if h not in top]
    rng = np.random.default_rng(seed)
    picked = rng.choice(len(others), size=min(count, len(others)), replace=False)
    return top, [others[i] for i in sorted(picked)], only_silent


@dataclass(frozen=True)
class AnswerSuccess:
    """One needle-in-a-haystack prompt read with the answer appended (teacher-forced): ``log_probability`` Σ log p(answer
    token | everything before it); ``top_everywhere``: every answer token was the model's most likely next token (so
    greedy decoding writes the answer); ``prompt_tokens``: the prompt's length without the answer; ``needle_start``:
    the needle's first token (two depths that give the same one measure one placement)."""

    log_probability: float
    top_everywhere: bool
    prompt_tokens: int
    needle_start: int = -1

    @property
    def probability(self) -> float:
        return float(np.exp(self.log_probability))


def answer_success(lm, haystack: str, needle: str, question: str, answer: str, depth: float) -> AnswerSuccess:
    """The answer's probability and whether it ranks first at each of its tokens, on the prompt ``build_prompt``
    makes; one pass, no attention kept (``retrieval_scores`` reads the same prompt)."""
    prompt = build_prompt(lm.tokenizer, haystack, needle, question, answer, depth)
    token_ids, answer_span = prompt.token_ids, prompt.answer_span
    if len(token_ids) > lm.max_tokens:
        raise AnalysisError(f"The prompt is {len(token_ids):,} tokens, more than {lm.name}'s {lm.max_tokens:,}: "
                            "use a shorter haystack.")
    rows = list(range(answer_span[0] - 1, answer_span[1] - 1))
    ids = torch.tensor([token_ids], device=lm.device)
    with torch.inference_mode(), threads_for_input(ids.numel()):
        logits = lm.model(input_ids=ids, logits_to_keep=len(token_ids) - rows[0]).logits[0].float()  # [A + 1, vocab]
    log_probs = torch.log_softmax(logits, dim=-1)
    targets = token_ids[answer_span[0]:answer_span[1]]
    picked = [float(log_probs[r - rows[0], t]) for r, t in zip(rows, targets, strict=True)]
    top = all(int(torch.argmax(log_probs[r - rows[0]])) == t for r, t in zip(rows, targets, strict=True))
    return AnswerSuccess(float(sum(picked)), top, answer_span[0], prompt.needle_span[0])


@dataclass(frozen=True, eq=False)
class DepthLengthGrid:
    """``depths`` (fractions, rows) × ``lengths`` (haystack tokens, columns): ``probability`` float ``[D, N]`` of the
    answer, ``top`` bool ``[D, N]`` (``AnswerSuccess.top_everywhere``), ``prompt_tokens`` int ``[D, N]``; a cell not
    measured (stopped) is NaN, False and 0, and ``measured`` bool ``[D, N]`` says which are; ``needle_start`` int
    ``[D, N]``: the needle's first token in each cell's prompt (-1 where unknown)."""

    depths: tuple[float, ...]
    lengths: tuple[int, ...]
    probability: np.ndarray
    top: np.ndarray
    prompt_tokens: np.ndarray
    measured: np.ndarray
    needle_start: np.ndarray | None = None

    def shared_placements(self) -> list[tuple[int, tuple[int, ...]]]:
        """``(column, rows)`` for each group of measured depths of one length that put the needle at the same token,
        so that their cells measure one placement."""
        if self.needle_start is None:
            return []
        groups = []
        for column in range(len(self.lengths)):
            rows = [r for r in range(len(self.depths)) if self.measured[r, column] and self.needle_start[r, column] >= 0]
            by_start: dict[int, list[int]] = {}
            for r in rows:
                by_start.setdefault(int(self.needle_start[r, column]), []).append(r)
            groups += [(column, tuple(g)) for g in by_start.values() if len(g) > 1]
        return groups


def depth_length_grid(cell: Callable[[float, int], AnswerSuccess | None], depths: Sequence[float],
                      lengths: Sequence[int], progress: Callable[[int, int], None] | None = None) -> DepthLengthGrid:
    """The grid of ``cell(depth, length)`` (an ``AnswerSuccess``, or None for a cell not measured), column by column
    (every depth at the shortest length first); ``progress(done, total)`` after each cell."""
    shape = (len(depths), len(lengths))
    probability, top = np.full(shape, np.nan), np.zeros(shape, dtype=bool)
    tokens, measured = np.zeros(shape, dtype=int), np.zeros(shape, dtype=bool)
    starts = np.full(shape, -1, dtype=int)
    total = len(depths) * len(lengths)
    for column, length in enumerate(lengths):
        for row, depth in enumerate(depths):
            found = cell(depth, length)
            if found is not None:
                probability[row, column], top[row, column] = found.probability, found.top_everywhere
                tokens[row, column], measured[row, column] = found.prompt_tokens, True
                starts[row, column] = found.needle_start
            if progress:
                progress(column * len(depths) + row + 1, total)
    return DepthLengthGrid(tuple(depths), tuple(lengths), probability, top, tokens, measured, starts)
