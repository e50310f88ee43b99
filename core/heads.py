"""``core.heads``, the path named by issue 37 (constraints) and the README; the module is ``core.attention_heads.inside_head``."""

from core.attention_heads.inside_head import (
    DESCRIPTIONS,
    RECORDED,
    SUPPORTED,
    VERIFY_TOLERANCE,
    Architecture,
    HeadComputation,
    architecture,
    check_supported,
    compute_head,
    embeddings_description,
    value_vectors_through_output,
    verify_layer,
)

__all__ = [
    "Architecture", "architecture", "check_supported", "compute_head", "DESCRIPTIONS", "embeddings_description",
    "HeadComputation", "RECORDED", "SUPPORTED", "value_vectors_through_output", "verify_layer", "VERIFY_TOLERANCE"
]
