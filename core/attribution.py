"""``core.attribution``, the path named by issue 37 (constraints) and issue 27; the module is ``core.causal.token_attribution``."""

from core.causal.logit_attribution import LogitAttribution, direct_logit_attribution
from core.causal.token_attribution import (
    ATTRIBUTION_METHODS,
    GAP_THRESHOLD,
    MAX_REFINED_EVALUATIONS,
    MIN_STEPS,
    PANEL_NODES,
    REFINED_STEPS_FACTOR,
    TOKENS_PER_BATCH,
    Attribution,
    AttributionMethod,
    refinement_budget,
    rollout_to_tokens,
    token_attribution,
)

__all__ = [
    "Attribution", "ATTRIBUTION_METHODS", "AttributionMethod", "direct_logit_attribution", "GAP_THRESHOLD",
    "LogitAttribution", "MAX_REFINED_EVALUATIONS", "MIN_STEPS", "PANEL_NODES", "REFINED_STEPS_FACTOR",
    "refinement_budget", "rollout_to_tokens", "token_attribution", "TOKENS_PER_BATCH"
]
