"""``core.retrieval``, the path named by issue 41 (item 5); the module is ``core.attention_heads.retrieval``."""

from core.attention_heads.retrieval import (
    DEFAULT_ANSWER,
    DEFAULT_NEEDLE,
    DEFAULT_QUESTION,
    HAYSTACK_FILE,
    HAYSTACK_SOURCE,
    AnswerSuccess,
    DepthLengthGrid,
    RetrievalScores,
    answer_log_probability,
    answer_success,
    build_prompt,
    bundled_haystack,
    contains_answer,
    depth_length_grid,
    haystack_of_length,
    model_answer,
    needle_cut,
    retrieval_scores,
    top_and_random_heads,
)

__all__ = [
    "answer_log_probability", "answer_success", "AnswerSuccess", "build_prompt", "bundled_haystack",
    "contains_answer", "DEFAULT_ANSWER", "DEFAULT_NEEDLE", "DEFAULT_QUESTION", "depth_length_grid",
    "DepthLengthGrid", "HAYSTACK_FILE", "haystack_of_length", "HAYSTACK_SOURCE", "model_answer", "needle_cut",
    "retrieval_scores", "RetrievalScores", "top_and_random_heads"
]
