"""``core.models``, the path named by issue 37 (constraints) and the README; the module is ``core.model.models``."""

from core.model.models import (
    BUNDLED_ALIASES,
    BUNDLED_KINDS,
    BUNDLED_LM,
    BUNDLED_MODELS,
    DEFAULT_MODEL,
    HUB_PROBE_TIMEOUT_S,
    ONE_THREAD_BELOW_TOKENS,
    WEIGHT_LOAD_LOCK,
    LoadedModel,
    ModelLoadError,
    bundled_model_path,
    bundled_name,
    cached_on_disk,
    first_line,
    is_bundled,
    load_model,
    pooler_sentence,
    threads_for_input,
)

__all__ = [
    "BUNDLED_ALIASES", "BUNDLED_KINDS", "BUNDLED_LM", "bundled_model_path", "BUNDLED_MODELS", "bundled_name",
    "cached_on_disk", "DEFAULT_MODEL", "first_line", "HUB_PROBE_TIMEOUT_S", "is_bundled", "load_model",
    "LoadedModel", "ModelLoadError", "ONE_THREAD_BELOW_TOKENS", "pooler_sentence", "threads_for_input",
    "WEIGHT_LOAD_LOCK"
]
