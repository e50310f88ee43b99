"""``core.flow``, the path named by issue 39 (items 1 and 2); the module is ``core.causal.flow``."""

from core.causal.flow import (
    DEFAULT_THRESHOLD,
    KIND_ORDER,
    QUERY_CHUNK_CELLS,
    Contributions,
    Edge,
    Node,
    RouteGraph,
    carriers,
    contributions,
    contributions_of,
    edge_order,
    head_terms,
    layer_runs,
    lens_logits,
    output_map,
    proximity_shares,
    record_output_map,
    route_graph,
    stack_incoming,
    top_tokens,
    unembedding_of,
    written_logits,
)
from core.causal.flow_reading import route_sentence

__all__ = [
    "carriers", "Contributions", "contributions", "contributions_of", "DEFAULT_THRESHOLD", "Edge", "edge_order",
    "head_terms", "KIND_ORDER", "layer_runs", "lens_logits", "Node", "output_map", "proximity_shares",
    "QUERY_CHUNK_CELLS", "record_output_map", "route_graph", "route_sentence", "RouteGraph", "stack_incoming",
    "top_tokens", "unembedding_of", "written_logits"
]
