"""The long-context page's caches: the bundled haystack cut to a length in a model's tokens, and one
``core.attention_heads.long_context.LongContextProfile`` per run (model, text, tokens read as its token limit)."""

from __future__ import annotations

from collections.abc import Callable

from core.attention_heads.long_context import LongContextProfile, long_context_profile, text_ids
from core.attention_heads.retrieval import bundled_haystack, haystack_of_length
from ui.cache import model_and_run, model_turn, run_of
from ui.store import cached, stored


def cached_long_haystack(model_name: str, tokens: int) -> str:
    """The bundled haystack cut at a sentence end so that, with the special tokens the tokenizer adds, it is at most
    ``tokens`` tokens of ``model_name``."""
    model, run = model_and_run(model_name, (), tokens)

    def compute() -> str:
        tokenizer = model.tokenizer
        added = len(tokenizer("", add_special_tokens=True)["input_ids"])
        return haystack_of_length(tokenizer, bundled_haystack(), tokens - added)

    return cached("long-context-haystacks", run, compute)


def profile_if_cached(model_name: str, text: str, tokens: int) -> LongContextProfile | None:
    return stored("long-context", run_of(model_name, (text,), tokens))


def cached_profile(model_name: str, text: str, tokens: int,
                   progress: Callable[[int, int], None] | None = None) -> LongContextProfile:
    """``core.attention_heads.long_context.long_context_profile`` of ``text`` cut to ``tokens`` tokens; ``progress(done, total)``
    only when the model runs."""
    model, run = model_and_run(model_name, (text,), tokens)

    def compute() -> LongContextProfile:
        ids, _, _ = text_ids(model.tokenizer, text, tokens)
        with model_turn():
            return long_context_profile(model, ids, progress=progress)

    return cached("long-context", run, compute)
