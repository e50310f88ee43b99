"""``core.recording``, the path named by issue 37 (done when); the module is ``core.model.recording``."""

from core.model.recording import (
    IMPLEMENTATION,
    SINGLE_STACK,
    AttentionReached,
    LayerRecord,
    Recorder,
    Replacement,
    UnsupportedArchitecture,
    attention_modules,
    explorer_attention,
    implementation_for,
    is_recordable,
    model_of,
    record_keys,
    recorded_by,
    records_every_layer,
    rotate_back,
)

__all__ = [
    "attention_modules", "AttentionReached", "explorer_attention", "IMPLEMENTATION", "implementation_for",
    "is_recordable", "LayerRecord", "model_of", "record_keys", "recorded_by", "Recorder", "records_every_layer",
    "Replacement", "rotate_back", "SINGLE_STACK", "UnsupportedArchitecture"
]
