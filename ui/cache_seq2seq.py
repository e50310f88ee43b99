"""Encoder-decoder caches (T5, BART, Marian …): the model's own targets and one ``PairAnalysis`` per (model,
source, target, token limit), and the attention views drawn from it.
"""

from __future__ import annotations

from core.attention_heads.cross_attention import pair_attention_view
from core.model.seq2seq import analyze_pair, generate_target
from ui.cache import model_and_run, run_of
from ui.store import cached, stored

# Encoder-decoder models (T5, BART, Marian …): the model's own targets, and one PairAnalysis per run (model, source
# and target, token limit). A PairAnalysis holds its encoder's and decoder's attentions too.


def cached_generated_target(model_name: str, source: str, max_tokens: int | None, progress=None) -> str:
    """``core.model.seq2seq.generate_target`` keyed by (model, source, token limit); ``progress(done, total)``
    only when the model runs."""
    model, run = model_and_run(model_name, (source,), max_tokens)
    return cached("generated-targets", run,
                  lambda: generate_target(model, source, max_tokens=max_tokens, progress=progress))


def generated_target_if_cached(model_name: str, source: str, max_tokens: int | None) -> str | None:
    """The target ``cached_generated_target`` wrote for this source, or None when it has not run."""
    return stored("generated-targets", run_of(model_name, (source,), max_tokens))


def cached_pair(model_name: str, source: str, target: str, max_tokens: int | None = None):
    """``core.model.seq2seq.analyze_pair`` of a given (non-empty) target, per (model, source, target, token limit)."""
    model, run = model_and_run(model_name, (source, target), max_tokens)
    return cached("pairs", run, lambda: analyze_pair(model, source, target, max_tokens=max_tokens))


def cached_pair_view(model_name: str, source: str, target: str, max_tokens: int | None, stack: str, special: str, words: bool):
    """``core.attention_heads.cross_attention.pair_attention_view`` of one stack ("encoder", "decoder", "cross") of ``cached_pair``."""
    return cached("pair-views", run_of(model_name, (source, target), max_tokens),
                  lambda: pair_attention_view(cached_pair(model_name, source, target, max_tokens), stack, special=special,
                                              words=words),
                  (stack, special, words))
