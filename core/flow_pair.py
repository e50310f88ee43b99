"""``core.flow_pair``, the path named by README.md or docs/ before issue 37 item 6; the module is ``core.causal.flow_pair``."""

from core.causal.flow_pair import (
    ENCODER,
    KeptWeightsPass,
    PairContributions,
    PairPass,
    decoder_logits,
    pair_contributions,
    pair_contributions_of,
    pair_ids,
    pair_route_sentence,
    record_pair,
)

__all__ = [
    "decoder_logits", "ENCODER", "KeptWeightsPass", "pair_contributions", "pair_contributions_of", "pair_ids",
    "pair_route_sentence", "PairContributions", "PairPass", "record_pair"
]
