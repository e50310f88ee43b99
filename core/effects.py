"""``core.effects``, the path named by issue 37 (constraints); the module is ``core.causal.effects``."""

from core.causal.effects import (
    MEASURES,
    METHODS,
    TOKENS_PER_BATCH,
    EffectsError,
    Measure,
    Method,
    Network,
    Target,
    ablate_heads,
    ablation,
    check_supported,
    encode,
    head_importance,
    mean_pooled,
    network,
    resolve_target,
    target_position,
    target_token_id,
)

__all__ = [
    "ablate_heads", "ablation", "check_supported", "EffectsError", "encode", "head_importance", "mean_pooled",
    "Measure", "MEASURES", "Method", "METHODS", "Network", "network", "resolve_target", "Target",
    "target_position", "target_token_id", "TOKENS_PER_BATCH"
]
