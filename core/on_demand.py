"""``core.on_demand``, the path named by README.md or docs/ before issue 37 item 6; the module is ``core.model.on_demand``."""

from core.model.on_demand import (
    BLOCK_CELLS,
    MASK_MIN_CELLS,
    MEMO_LAYERS,
    Hidden,
    LayerQueriesKeys,
    OnDemandAttention,
    Stored,
    StoredMask,
    eager_weights,
    release_freed_memory,
)

__all__ = [
    "BLOCK_CELLS", "eager_weights", "Hidden", "LayerQueriesKeys", "MASK_MIN_CELLS", "MEMO_LAYERS",
    "OnDemandAttention", "release_freed_memory", "Stored", "StoredMask"
]
