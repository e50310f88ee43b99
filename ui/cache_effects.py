"""The caches of the causal tools (Does it matter?, Predictions' lens): knock-out runs, importance maps,
attributions and the logit lens, each keyed by (model, text, token limit, options).
"""

from __future__ import annotations

import numpy as np

from core.causal.effects import head_importance
from core.causal.effects_compare import target_change
from core.causal.token_attribution import token_attribution
from core.model.models import LoadedModel
from core.model.run import Run
from core.outputs.lens import logit_lens
from ui.cache import analysis_of, cached_language_model, model_and_run, read_only, run_of
from ui.store import cached

# Effects page ("Does it matter?"): knock-out runs, importance maps, attributions and the logit lens, each keyed by
# its run (model, text, token limit) and its options. The one store rather than st.cache_data, because ``progress``
# draws into the page and a cache that records page updates would replay them on a hit.


def _effects_model(model: LoadedModel | None, model_name: str, measure: str):
    """The base model ("embedding") or the model with its language-model head ("target"; raises its ``NoLanguageModelHead``)."""
    if measure != "target":
        return model
    language_model = cached_language_model(model_name)
    if isinstance(language_model, Exception):
        raise language_model
    return language_model


def cached_head_importance(model_name: str, text: str, max_tokens: int | None, measure: str, method: str,
                           target: str | None = None, progress=None) -> np.ndarray:
    """``core.causal.effects.head_importance``: read-only ``[layers, heads]``; ``progress(done, total)`` only when the model runs."""
    model, run = _model_and_run(model_name, text, max_tokens, measure)
    return cached("head-importance", run,
                  lambda: read_only(head_importance(_effects_model(model, model_name, measure), text, measure=measure,
                                                    method=method, target=target, progress=progress,
                                                    max_tokens=max_tokens)),
                  (measure, method, target))


def cached_target_change(model_name: str, text: str, max_tokens: int | None, heads: tuple, method: str,
                         target: str | None = None, k: int = 5):
    """``core.causal.effects_compare.target_change``: top-``k`` predictions and log p(target) before and after the knock-out."""
    run = run_of(model_name, (text,), max_tokens, (heads, method))
    return cached("target-changes", run,
                  lambda: target_change(_effects_model(None, model_name, "target"), text, heads, method=method,
                                        target=target, k=k, max_tokens=max_tokens),
                  (target, k))


def cached_attribution(model_name: str, text: str, max_tokens: int | None, method: str, measure: str,
                       steps: int = 32, target: str | None = None, progress=None):
    """``core.causal.token_attribution.token_attribution`` of ``text``; ``progress(done, total)`` only when the model runs."""
    model, run = _model_and_run(model_name, text, max_tokens, measure)
    return cached("attributions", run,
                  lambda: token_attribution(_effects_model(model, model_name, measure), text, method=method,
                                            measure=measure, steps=steps, target=target, max_tokens=max_tokens,
                                            progress=progress),
                  (method, measure, steps, target))


def cached_lens(model_name: str, text: str, max_tokens: int | None, k: int = 5, *, start: int = 0):
    """``core.outputs.lens.logit_lens`` of ``cached_analysis(model_name, text, max_tokens)`` through the model's own head,
    at the positions from ``start`` on."""
    model, run = model_and_run(model_name, (text,), max_tokens)
    return cached("logit-lens", run,
                  lambda: logit_lens(_effects_model(model, model_name, "target"), analysis_of(model, run), k=k,
                                     start=start),
                  (k, start))


def _model_and_run(model_name: str, text: str, max_tokens: int | None, measure: str) -> tuple[LoadedModel | None, Run]:
    """The base model (None when ``measure`` is "target": the language model is loaded instead) and the run."""
    if measure == "target":
        return None, run_of(model_name, (text,), max_tokens)
    return model_and_run(model_name, (text,), max_tokens)
