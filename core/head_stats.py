"""``core.head_stats``, the path named by issue 37 (constraints) and issue 27; the module is ``core.attention_heads.head_statistics``."""

from core.attention_heads.head_statistics import (
    DEFINITIONS,
    STATISTICS,
    UNIFORM_ENTROPY,
    TokenRoles,
    analysis_statistics,
    corpus_statistics,
    head_statistics,
    is_punctuation,
    mean_statistics,
    rank_heads,
    sink_token_ids,
    statistic_grid,
    token_roles,
)
from core.attention_heads.induction import InductionScores, induction_scores

__all__ = [
    "analysis_statistics", "corpus_statistics", "DEFINITIONS", "head_statistics", "induction_scores",
    "InductionScores", "is_punctuation", "mean_statistics", "rank_heads", "sink_token_ids", "statistic_grid",
    "STATISTICS", "token_roles", "TokenRoles", "UNIFORM_ENTROPY"
]
