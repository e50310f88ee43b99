"""``core.contextuality``, the path named by README.md or docs/ before issue 37 item 6; the module is ``core.representations.contextuality``."""

from core.representations.contextuality import (
    BASELINE_WORDS_PER_DOCUMENT,
    LOWEST_MARGIN,
    MAX_OCCURRENCES_PER_WORD,
    MAX_WORDS,
    MIN_OCCURRENCES,
    SENTENCE_END,
    Contextuality,
    ContextualityAccumulator,
    contextuality,
    contextuality_sentence,
    embed_corpus_and_contextuality,
    intra_sentence_similarity,
    mean_cross_group_cosine,
)

__all__ = [
    "BASELINE_WORDS_PER_DOCUMENT", "Contextuality", "contextuality", "contextuality_sentence",
    "ContextualityAccumulator", "embed_corpus_and_contextuality", "intra_sentence_similarity", "LOWEST_MARGIN",
    "MAX_OCCURRENCES_PER_WORD", "MAX_WORDS", "mean_cross_group_cosine", "MIN_OCCURRENCES", "SENTENCE_END"
]
