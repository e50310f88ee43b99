"""``core.flow_details``, the path named by README.md or docs/ before issue 37 item 6; the module is ``core.causal.flow_details``."""

from core.causal.flow_details import (
    ROUTE_MARGIN,
    TOP_HEADS,
    HeadEdge,
    Neurons,
    RouteSummary,
    decode,
    head_write,
    mlp_output_map,
    neuron_terms,
    route_summary,
    top_neurons,
)

__all__ = [
    "decode", "head_write", "HeadEdge", "mlp_output_map", "neuron_terms", "Neurons", "ROUTE_MARGIN",
    "route_summary", "RouteSummary", "TOP_HEADS", "top_neurons"
]
