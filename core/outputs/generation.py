"""Sampling controls and generation step by step, with the tokens the model did not choose.

``next_token_distribution`` reshapes the model's next-token distribution as samplers do: logits divided by the
temperature, softmax, the top-k kept, then the smallest prefix whose mass reaches top-p, renormalised.
``generate`` writes one token at a time (greedy, or sampling seeded so that a link reproduces it), recording each
token's probability and its best alternatives; a *branch* (token ids chosen by hand) fixes the first tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from core.outputs.causal_lm import encode
from core.outputs.predictions import LanguageModel, last_position_only


@dataclass(frozen=True, eq=False)
class Distribution:
    """The next-token distribution before and after the sampling controls.

    ``order``: int ``[V]`` token ids by raw probability, best first; ``raw``: ``[V]`` the softmax at temperature 1
    in that order; ``scaled``: ``[V]`` the softmax at the chosen temperature, same order; ``kept``: ``[V]`` bool,
    which survive top-k and top-p; ``probs``: ``[V]`` the renormalised sampling probabilities (0 where cut);
    ``entropy_before`` (of ``scaled``) and ``entropy_after`` (of ``probs``) in nats.
    """

    order: np.ndarray
    raw: np.ndarray
    scaled: np.ndarray
    kept: np.ndarray
    probs: np.ndarray
    entropy_before: float
    entropy_after: float
    temperature: float
    top_k: int
    top_p: float

    @property
    def token_ids(self) -> np.ndarray:
        """The kept token ids, best first."""
        return self.order[self.kept]

    @property
    def kept_probs(self) -> np.ndarray:
        return self.probs[self.kept]


def _entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def shape_distribution(logits: torch.Tensor, *, temperature: float = 1.0, top_k: int = 0,
                       top_p: float = 1.0) -> Distribution:
    """The sampling distribution of one row of ``logits`` ``[V]`` (see the module docstring)."""
    if not temperature > 0:
        raise ValueError("The temperature must be above 0 (use greedy decoding for 'always the top token').")
    if not 0 < top_p <= 1:
        raise ValueError("top-p must be above 0 and at most 1.")
    logits = logits.detach().double().cpu()
    order = torch.argsort(logits, descending=True, stable=True)
    raw = logits[order].softmax(-1).numpy()
    scaled = (logits[order] / temperature).softmax(-1).numpy()
    kept = np.ones(len(order), dtype=bool)
    if top_k and top_k > 0:
        kept[int(top_k):] = False
    mass = np.where(kept, scaled, 0.0)
    mass = mass / mass.sum()
    if top_p < 1:
        # the smallest prefix whose mass reaches top_p (a float tolerance so that 0.3 + 0.7 reaches 1.0)
        reach = int(np.searchsorted(np.cumsum(mass), top_p - 1e-12)) + 1
        kept[reach:] = False
    probs = np.where(kept, scaled, 0.0)
    probs = probs / probs.sum()
    return Distribution(order.numpy(), raw, scaled, kept, probs, _entropy(scaled), _entropy(probs),
                        float(temperature), int(top_k), float(top_p))


def last_logits(lm: LanguageModel, ids: torch.Tensor) -> torch.Tensor:
    """The model's logits ``[V]`` for the token after ``ids`` ``[T]``."""
    with torch.inference_mode():
        return lm.model(input_ids=ids[None], **last_position_only(lm.model)).logits[0, -1]


def _next_logits(lm: LanguageModel, ids: torch.Tensor, cache) -> tuple[torch.Tensor, object]:
    """``last_logits`` of ``ids`` ``[T]`` and the model's key/value cache after it. With ``cache`` (the cache of
    ``ids[:-1]``) only the last token is run: one token's work per generated token instead of the whole text's."""
    with torch.inference_mode():
        if cache is None:
            out = lm.model(input_ids=ids[None], use_cache=True, **last_position_only(lm.model))
        else:
            out = lm.model(input_ids=ids[None, -1:], past_key_values=cache, use_cache=True)
    return out.logits[0, -1], getattr(out, "past_key_values", None)


def greedy_ids(lm: LanguageModel, ids: torch.Tensor, *, steps: int) -> list[int]:
    """Up to ``steps`` token ids written greedily after ``ids`` ``[T]`` through the key/value cache; stops after the
    end-of-text token or at the model's token limit."""
    eos = lm.tokenizer.eos_token_id
    written: list[int] = []
    cache = None
    for _ in range(steps):
        if len(ids) >= lm.max_tokens:
            break
        logits, cache = _next_logits(lm, ids, cache)
        token = int(logits.argmax())
        written.append(token)
        ids = torch.cat([ids, ids.new_tensor([token])])
        if token == eos:
            break
    return written


def sampling_distribution(lm: LanguageModel, text: str, *, temperature: float = 1.0, top_k: int = 0,
                          top_p: float = 1.0) -> Distribution:
    """``shape_distribution`` of the token after ``text``: the kept and the cut tokens, entropies before and after."""
    return shape_distribution(last_logits(lm, encode(lm, text)), temperature=temperature, top_k=top_k, top_p=top_p)


def next_token_distribution(lm: LanguageModel, text: str, *, temperature: float = 1.0, top_k: int = 0,
                            top_p: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """``(token_ids, probs)`` of the tokens a sampler may draw after ``text``, best first, ``probs`` summing to 1."""
    d = sampling_distribution(lm, text, temperature=temperature, top_k=top_k, top_p=top_p)
    return d.token_ids, d.kept_probs


@dataclass(frozen=True)
class Step:
    """One generated token: ``token_id``, its ``text``, ``probability`` (the model's, temperature 1),
    ``sampling_probability`` (in the shaped distribution it was drawn from), ``chosen`` (True when the branch fixed
    it), and the best ``alternatives``: ``(token_id, text, probability)`` by the model's probability."""

    token_id: int
    text: str
    probability: float
    sampling_probability: float
    chosen: bool
    alternatives: list[tuple[int, str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Generation:
    """``prompt``; ``steps``; ``stopped`` (the stop check ended it early); ``ended`` (the model wrote its
    end-of-text token). ``text`` is the prompt and every generated token."""

    prompt: str
    steps: list[Step]
    stopped: bool
    ended: bool

    @property
    def text(self) -> str:
        return self.prompt + "".join(s.text for s in self.steps)

    @property
    def token_ids(self) -> list[int]:
        return [s.token_id for s in self.steps]


def generate(lm: LanguageModel, text: str, *, steps: int = 10, sample: bool = False, seed: int = 0,
             temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, branch: Sequence[int] = (),
             alternatives: int = 5, progress: Callable[[int, int], None] | None = None,
             should_stop: Callable[[], bool] | None = None, resume: Sequence[Step] = (),
             max_tokens: int | None = None) -> Generation:
    """Write up to ``steps`` tokens after ``text``, one forward pass per token (the first over the whole text, then
    one token at a time through the model's key/value cache).

    ``branch``: token ids that replace the first generated tokens (continuing from a chosen alternative).
    Greedy takes the top token; sampling draws step ``i`` with ``numpy.random.default_rng([seed, i])`` from the
    shaped distribution, so the same seed, controls and branch give the same text. ``progress(done, total)`` is
    called after each token; generation stops early when ``should_stop()`` is true or the end-of-text token comes.
    ``resume``: the steps of an earlier call with the same arguments that stopped early; they are kept and writing
    goes on after them, so the result is the one an uninterrupted call gives. ``max_tokens``: read only the text's
    first tokens (as ``encode``; the prompt is then those tokens decoded); the written tokens may go on up to the
    model's own limit.
    """
    ids = encode(lm, text, max_tokens)
    if max_tokens is not None and len(lm.tokenizer(text)["input_ids"]) > len(ids):  # cut: the prompt is what was read
        text = lm.tokenizer.decode(ids.tolist(), skip_special_tokens=True, clean_up_tokenization_spaces=False)
    eos = lm.tokenizer.eos_token_id
    out: list[Step] = list(resume)
    if out:
        ids = torch.cat([ids, ids.new_tensor([s.token_id for s in out])])
    stopped = False
    ended = bool(out) and eos is not None and out[-1].token_id == eos
    total = max(int(steps), len(branch))
    cache = None
    for i in range(len(out), total if not ended else 0):
        if should_stop is not None and should_stop():
            stopped = True
            break
        if len(ids) >= lm.max_tokens:
            break
        logits, cache = _next_logits(lm, ids, cache)
        d = shape_distribution(logits, temperature=temperature, top_k=top_k, top_p=top_p)
        raw = logits.double().softmax(-1)
        if i < len(branch):
            token, chosen = int(branch[i]), True
        elif sample:
            token, chosen = int(np.random.default_rng([seed, i]).choice(d.order, p=d.probs)), False
        else:
            token, chosen = int(d.order[0]), False
        best = raw.topk(min(alternatives + 1, raw.shape[-1]))
        alts = [(int(t), _text(lm, t), float(p)) for t, p in zip(best.indices.tolist(), best.values.tolist())
                if int(t) != token][:alternatives]
        where = np.nonzero(d.order == token)[0]
        out.append(Step(token, _text(lm, token), float(raw[token]), float(d.probs[where[0]]) if len(where) else 0.0,
                        chosen, alts))
        ids = torch.cat([ids, ids.new_tensor([token])])
        if progress is not None:
            progress(i + 1, total)
        if eos is not None and token == eos:
            ended = True
            break
    return Generation(text, out, stopped, ended)


def _text(lm: LanguageModel, token: int) -> str:
    return lm.tokenizer.decode([int(token)], clean_up_tokenization_spaces=False)


def branch_to_param(branch: Sequence[int]) -> str:
    """A branch as a link parameter: ``"464.11.9"``."""
    return ".".join(str(int(t)) for t in branch)


def branch_from_param(value: str | None, vocab_size: int) -> list[int]:
    """The branch in a link parameter; anything that is not a valid token id ends it there."""
    branch: list[int] = []
    for piece in (value or "").split("."):
        if not piece.isdigit() or int(piece) >= vocab_size:
            break
        branch.append(int(piece))
    return branch
