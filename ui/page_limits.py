"""How many tokens each page reads, and why: one table (issue 41).

The app reads a text up to the model's own window (SmolLM2-135M: 8,192 tokens) unless the deployment caps it
(``EXPLORER_MAX_TOKENS``, ``core.model.settings``). A page whose cost grows faster than that sets its own, lower limit here,
with the reason as a clause computed from the model's sizes and the text's length; ``ui.session.page_limit_notice``
says it above the page before anything is computed, and ``ui.session.current_token_limit`` applies it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core.model.inference import STORED_ATTENTION_MAX_TOKENS
from core.model.models import LoadedModel

# The memory one page may fill with its own results for one text: what the probabilities of gemma-3-270m's 262,144
# tokens after each of 512 positions take (float32 logits and float64 probabilities), a page that works: 1.6 GB.
PAGE_MEMORY_BUDGET = 512 * 262_144 * 12
FLOW_MAX_TOKENS = 128  # every (head, key) term's contributions, 128 tokens of SmolLM2: 3.5 CPU-s, 5.6 s at load 8 (bench flow)
CORPUS_BATCH = 16  # core.model.inference.iter_analyses' default batch: its hidden states exist at once


def size(nbytes: float) -> str:
    """``nbytes`` in words: "283 MB", "18 GB"."""
    if nbytes >= 1e9:
        return f"{nbytes / 1e9:,.1f} GB" if nbytes < 1e10 else f"{nbytes / 1e9:,.0f} GB"
    return f"{max(1, round(nbytes / 1e6)):,} MB"


def _vocabulary(model: LoadedModel) -> int:
    return int(getattr(model.model.config, "vocab_size", 0) or len(model.tokenizer))


def _power_of_two_at_most(value: float, floor: int = 16) -> int:
    n = floor
    while n * 2 <= value:
        n *= 2
    return n


def _every_head(model: LoadedModel, tokens: int) -> str:
    count = model.num_layers * model.num_heads
    return (f"it reads every head's attention weights at once, and {model.num_layers} layers × {model.num_heads} heads "
            f"× {tokens:,}² weights take {size(4 * count * tokens * tokens)}")


def _knock_outs(model: LoadedModel, tokens: int) -> str:
    count = model.num_layers * model.num_heads
    return (f"it re-runs the model once per head for its knock-outs ({count} passes over {tokens:,} tokens) and "
            "more for its attributions")


def _flow(model: LoadedModel, tokens: int) -> str:
    return (f"it splits every attention update into one term per head and key token: {model.num_layers} layers × "
            f"{model.num_heads} heads × {tokens:,}² terms of {model.hidden_size} numbers each")


def _vocabulary_size_limit(model: LoadedModel) -> int:
    return _power_of_two_at_most(PAGE_MEMORY_BUDGET / (12 * _vocabulary(model)))


def _probabilities(model: LoadedModel, tokens: int) -> str:
    vocabulary = _vocabulary(model)
    return (f"it computes the probability of each of the {vocabulary:,} tokens of the vocabulary after every position "
            f"(float32 logits and float64 probabilities: {tokens:,} × {vocabulary:,} × 12 bytes = "
            f"{size(12 * tokens * vocabulary)})")


def _corpus(model: LoadedModel, tokens: int) -> str:
    return (f"each document is a pass that keeps every layer's hidden states, {CORPUS_BATCH} documents at a time: "
            f"{CORPUS_BATCH} × {model.num_layers + 1} × {tokens:,} × {model.hidden_size} numbers take "
            f"{size(4 * CORPUS_BATCH * (model.num_layers + 1) * tokens * model.hidden_size)}")


def _needle(model: LoadedModel, tokens: int) -> str:
    return (f"its pass keeps every layer's queries, keys, values and inputs, and each layer's {model.num_heads} heads "
            f"× {tokens:,}² weights exist at once ({size(4 * model.num_heads * tokens * tokens)})")


@dataclass(frozen=True)
class PageLimit:
    """``tokens(model)``: the most tokens the page reads; ``why(model, tokens)``: a clause saying what the page would
    hold at ``tokens`` tokens; ``reads_text``: False when the limit is for each document of a corpus or for the page's
    own prompt, not for the sidebar's text."""

    tokens: Callable[[LoadedModel], int]
    why: Callable[[LoadedModel, int], str]
    reads_text: bool = True


def _fixed(n: int) -> Callable[[LoadedModel], int]:
    return lambda _model: n


_STORED = PageLimit(_fixed(STORED_ATTENTION_MAX_TOKENS), _every_head)
_CORPUS = PageLimit(_fixed(512), _corpus, reads_text=False)

# url path (``app.PAGES``; "home" for the home page) → its limit. A page not listed reads the whole window: Attention
# (one head at a time, core.attention_heads.attention.head_attention, above 512 tokens: ui.attention_page), Long context, Patching.
PAGE_LIMITS: dict[str, PageLimit] = {
    "home": _STORED,  # the model's facts average every head's weights
    "tour": _STORED,
    "maxima": _STORED,
    "stats": _STORED,
    "inside": _STORED,
    "compare": _STORED,
    "effects": PageLimit(_fixed(128), _knock_outs),
    "flow": PageLimit(_fixed(FLOW_MAX_TOKENS), _flow),  # about 10 s for 128 tokens of SmolLM2
    "predictions": PageLimit(_vocabulary_size_limit, _probabilities),
    "needle": PageLimit(_fixed(2048), _needle, reads_text=False),
    "drift": _CORPUS,
    "senses": _CORPUS,
    "qk-map": _CORPUS,
}


def page_limit(page: str, model: LoadedModel) -> int | None:
    """The most tokens ``page`` reads with ``model``, or None when it reads the whole window."""
    rule = PAGE_LIMITS.get(page)
    return None if rule is None else rule.tokens(model)


def limit_sentence(page: str, model: LoadedModel, text_tokens: int, allowed: int) -> str | None:
    """The sentence said above ``page`` when its own limit cuts a text of ``text_tokens`` tokens that the app would
    otherwise read up to ``allowed`` tokens; None when it does not cut it."""
    rule = PAGE_LIMITS.get(page)
    if rule is None or not rule.reads_text:
        return None
    limit = rule.tokens(model)
    wanted = min(text_tokens, allowed)
    if wanted <= limit:
        return None
    said = f"This page reads the first {limit:,} of the text's {text_tokens:,} tokens: {rule.why(model, wanted)}."
    if text_tokens > allowed:  # the why clause is at the ``allowed`` tokens the app would read, not at the whole text
        cap = (f"{model.name}'s {allowed:,}-token window" if allowed == model.max_tokens else
               f"the {allowed:,} tokens this deployment reads")
        said += (f" Even without this page's limit the text would be cut to {cap} (the size above is at that "
                 "length).")
    return said
