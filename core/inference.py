"""``core.inference``, the path named by issue 37 (constraints), issue 16 and the README; the module is ``core.model.inference``."""

from core.errors import AnalysisError
from core.model import inference as _moved
from core.model.inference import (
    QUERY_ROWS_PER_CHUNK,
    RELEASE_AFTER_LONG_PASS,
    STORED_ATTENTION_MAX_TOKENS,
    Analysis,
    analyze,
    analyze_many,
    iter_analyses,
    special_token_ids,
)

__getattr__ = _moved.__getattr__  # names it gives on demand (PEP 562)

__all__ = [
    "Analysis", "AnalysisError", "analyze", "analyze_many", "iter_analyses", "QUERY_ROWS_PER_CHUNK",
    "RELEASE_AFTER_LONG_PASS", "special_token_ids", "STORED_ATTENTION_MAX_TOKENS"
]
