"""``core.flow_cross``, the path named by README.md or docs/ before issue 37 item 6; the module is ``core.causal.flow_cross``."""

from core.causal.flow_cross import CrossFlow, cross_flow, cross_shares, cross_terms

__all__ = [
    "cross_flow", "cross_shares", "cross_terms", "CrossFlow"
]
