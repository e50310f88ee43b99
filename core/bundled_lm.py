"""``core.bundled_lm``, the path named by README.md or docs/ before issue 37 item 6; the module is ``core.model.bundled_lm``."""

from core.model.bundled_lm import (
    BUNDLED_LMS,
    BUSY,
    CACHE_ENV,
    FORMAT,
    GEMMA_NAME,
    GEMMA_PACKAGE,
    GGUF_FILE,
    LM_ALIASES,
    LM_NAME,
    MANIFEST,
    PACKAGE,
    SETTINGS_GGUF,
    STALE_TEMP_S,
    VERSIONED,
    WAIT,
    BundledLM,
    BundledLMError,
    assembled_gemma_gguf,
    bundled_lm,
    cache_folder,
    cache_problem,
    cache_ready,
    cache_root,
    cached_folder,
    gemma_gguf_path,
    gguf_path,
    is_bundled_lm,
    log,
    write_manifest,
)

__all__ = [
    "assembled_gemma_gguf", "bundled_lm", "BUNDLED_LMS", "BundledLM", "BundledLMError", "BUSY", "CACHE_ENV",
    "cache_folder", "cache_problem", "cache_ready", "cache_root", "cached_folder", "FORMAT", "gemma_gguf_path",
    "GEMMA_NAME", "GEMMA_PACKAGE", "GGUF_FILE", "gguf_path", "is_bundled_lm", "LM_ALIASES", "LM_NAME", "log",
    "MANIFEST", "PACKAGE", "SETTINGS_GGUF", "STALE_TEMP_S", "VERSIONED", "WAIT", "write_manifest"
]
