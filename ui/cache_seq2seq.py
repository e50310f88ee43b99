"""Encoder-decoder caches (T5, BART, Marian …): the model's own targets and one ``PairAnalysis`` per (model,
source, target, token limit), and the attention views drawn from it.
"""

from __future__ import annotations

import streamlit as st

from core.cross_attention import pair_attention_view
from core.seq2seq import analyze_pair, generate_target
from ui.bounded_cache import BoundedCache, nbytes_of
from ui.cache import MAX_ANALYSES, MAX_ATTENTION_VIEW_BYTES, MAX_ATTENTION_VIEWS, bounded_store, cached_model

# Encoder-decoder models (T5, BART, Marian …): the model's own targets, and one PairAnalysis per
# (model, source, target, token limit). A PairAnalysis holds its encoder's and decoder's attentions too.
MAX_PAIRS = 16
MAX_PAIR_BYTES = 1_000_000_000


def cached_generated_target(model_name: str, source: str, max_tokens: int | None, progress=None) -> str:
    """``core.seq2seq.generate_target`` keyed by (model, source, token limit); ``progress(done, total)``
    only when the model runs."""
    store = bounded_store("generated-targets", MAX_ANALYSES, 10_000_000)
    return store.get_or_compute(
        (model_name, source, max_tokens),
        lambda: generate_target(cached_model(model_name), source, max_tokens=max_tokens, progress=progress),
    )


def generated_target_if_cached(model_name: str, source: str, max_tokens: int | None) -> str | None:
    """The target ``cached_generated_target`` wrote for this source, or None when it has not run."""
    return bounded_store("generated-targets", MAX_ANALYSES, 10_000_000).get((model_name, source, max_tokens))


def _pair_bytes(pair) -> int:
    return nbytes_of(pair.cross_attentions) + nbytes_of(pair.source) + nbytes_of(pair.target)


@st.cache_resource(show_spinner=False)
def _pair_store() -> BoundedCache:
    return BoundedCache(max_entries=MAX_PAIRS, max_bytes=MAX_PAIR_BYTES, size_of=_pair_bytes)


def cached_pair(model_name: str, source: str, target: str, max_tokens: int | None = None):
    """``core.seq2seq.analyze_pair`` of a given (non-empty) target, per (model, source, target, token limit)."""
    model = cached_model(model_name)
    return _pair_store().get_or_compute(
        (model_name, source, target, max_tokens), lambda: analyze_pair(model, source, target, max_tokens=max_tokens)
    )


def cached_pair_view(model_name: str, source: str, target: str, max_tokens: int | None, stack: str, special: str, words: bool):
    """``core.cross_attention.pair_attention_view`` of one stack ("encoder", "decoder", "cross") of ``cached_pair``."""
    store = bounded_store("pair-views", MAX_ATTENTION_VIEWS, MAX_ATTENTION_VIEW_BYTES)
    return store.get_or_compute(
        (model_name, source, target, max_tokens, stack, special, words),
        lambda: pair_attention_view(cached_pair(model_name, source, target, max_tokens), stack, special=special, words=words),
    )
