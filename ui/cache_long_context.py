"""The long-context page's caches: the bundled haystack cut to a length in a model's tokens, and one
``core.long_context.LongContextProfile`` per (model, text, tokens read)."""

from __future__ import annotations

from collections.abc import Callable

from core.long_context import LongContextProfile, long_context_profile, text_ids
from core.retrieval import bundled_haystack, haystack_of_length
from ui.cache import bounded_store, cached_model, model_turn

MAX_PROFILES = 16
# A profile holds [L, H, T] float32 sink shares: 30 × 9 × 8,192 × 4 bytes = 8.8 MB for SmolLM2 at 8,192 tokens.
MAX_PROFILE_BYTES = 200_000_000


def _profiles():
    return bounded_store("long-context", MAX_PROFILES, MAX_PROFILE_BYTES)


def cached_long_haystack(model_name: str, tokens: int) -> str:
    """The bundled haystack cut at a sentence end so that, with the special tokens the tokenizer adds, it is at most
    ``tokens`` tokens of ``model_name``."""
    def compute() -> str:
        tokenizer = cached_model(model_name).tokenizer
        added = len(tokenizer("", add_special_tokens=True)["input_ids"])
        return haystack_of_length(tokenizer, bundled_haystack(), tokens - added)

    return bounded_store("long-context-haystacks", MAX_PROFILES, 10_000_000).get_or_compute((model_name, tokens), compute)


def profile_if_cached(model_name: str, text: str, tokens: int) -> LongContextProfile | None:
    return _profiles().get((model_name, text, tokens))


def cached_profile(model_name: str, text: str, tokens: int,
                   progress: Callable[[int, int], None] | None = None) -> LongContextProfile:
    """``core.long_context.long_context_profile`` of ``text`` cut to ``tokens`` tokens; ``progress(done, total)``
    only when the model runs."""
    def compute() -> LongContextProfile:
        model = cached_model(model_name)
        ids, _, _ = text_ids(model.tokenizer, text, tokens)
        with model_turn():
            return long_context_profile(model, ids, progress=progress)

    return _profiles().get_or_compute((model_name, text, tokens), compute)
