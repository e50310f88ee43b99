"""The caches of the causal tools (Does it matter?, Predictions' lens): knock-out runs, importance maps,
attributions and the logit lens, each keyed by (model, text, token limit, options).
"""

from __future__ import annotations

import numpy as np

from core.attribution import token_attribution
from core.effects import head_importance
from core.effects_compare import target_change
from core.lens import logit_lens
from ui.cache import bounded_store, cached_analysis, cached_language_model, cached_model, read_only

# Effects page ("Does it matter?"): knock-out runs, importance maps, attributions and the logit lens,
# each keyed by (model, text, token limit, options). Bounded stores rather than st.cache_data, because
# ``progress`` draws into the page and a cache that records page updates would replay them on a hit.
MAX_EFFECTS = 32
MAX_EFFECTS_BYTES = 400_000_000


def _effects_model(model_name: str, measure: str):
    """The base model ("embedding") or the model with its language-model head ("target"; raises its ``NoLanguageModelHead``)."""
    if measure != "target":
        return cached_model(model_name)
    language_model = cached_language_model(model_name)
    if isinstance(language_model, Exception):
        raise language_model
    return language_model


def cached_head_importance(model_name: str, text: str, max_tokens: int | None, measure: str, method: str,
                           target: str | None = None, progress=None) -> np.ndarray:
    """``core.effects.head_importance``: read-only ``[layers, heads]``; ``progress(done, total)`` only when the model runs."""
    store = bounded_store("head-importance", MAX_EFFECTS, MAX_EFFECTS_BYTES)
    return store.get_or_compute(
        (model_name, text, max_tokens, measure, method, target),
        lambda: read_only(head_importance(_effects_model(model_name, measure), text, measure=measure, method=method,
                                           target=target, progress=progress, max_tokens=max_tokens)),
    )


def cached_target_change(model_name: str, text: str, max_tokens: int | None, heads: tuple, method: str,
                         target: str | None = None, k: int = 5):
    """``core.effects_compare.target_change``: top-``k`` predictions and log p(target) before and after the knock-out."""
    store = bounded_store("target-changes", MAX_EFFECTS, MAX_EFFECTS_BYTES)
    return store.get_or_compute(
        (model_name, text, max_tokens, tuple(heads), method, target, k),
        lambda: target_change(_effects_model(model_name, "target"), text, heads, method=method, target=target, k=k,
                              max_tokens=max_tokens),
    )


def cached_attribution(model_name: str, text: str, max_tokens: int | None, method: str, measure: str,
                       steps: int = 32, target: str | None = None, progress=None):
    """``core.attribution.token_attribution`` of ``text``; ``progress(done, total)`` only when the model runs."""
    store = bounded_store("attributions", MAX_EFFECTS, MAX_EFFECTS_BYTES)
    return store.get_or_compute(
        (model_name, text, max_tokens, method, measure, steps, target),
        lambda: token_attribution(_effects_model(model_name, measure), text, method=method, measure=measure,
                                  steps=steps, target=target, max_tokens=max_tokens, progress=progress),
    )


def cached_lens(model_name: str, text: str, max_tokens: int | None, k: int = 5, *, start: int = 0):
    """``core.lens.logit_lens`` of ``cached_analysis(model_name, text, max_tokens)`` through the model's own head,
    at the positions from ``start`` on."""
    store = bounded_store("logit-lens", MAX_EFFECTS, MAX_EFFECTS_BYTES)
    return store.get_or_compute(
        (model_name, text, max_tokens, k, start),
        lambda: logit_lens(_effects_model(model_name, "target"), cached_analysis(model_name, text, max_tokens), k=k,
                           start=start),
    )
