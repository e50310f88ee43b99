"""``core.long_context``, the path named by README.md or docs/ before issue 37 item 6; the module is ``core.attention_heads.long_context``."""

from core.attention_heads.long_context import (
    BLOCK_CELLS,
    FAR_DISTANCE,
    FAR_SHARE,
    LOCAL_DISTANCE,
    LOCAL_SHARE,
    SINK_SHARE,
    LongContextProfile,
    bin_labels,
    distance_edges,
    head_kinds,
    long_context_profile,
    sliding_windows,
    text_ids,
)

__all__ = [
    "bin_labels", "BLOCK_CELLS", "distance_edges", "FAR_DISTANCE", "FAR_SHARE", "head_kinds", "LOCAL_DISTANCE",
    "LOCAL_SHARE", "long_context_profile", "LongContextProfile", "SINK_SHARE", "sliding_windows", "text_ids"
]
