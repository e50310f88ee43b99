"""The caches of the needle-in-a-haystack page: retrieval scores, the model's greedy answer and the knock-outs, each
keyed by the run (model, the needle, question and answer, the haystack's length in tokens as its token limit) and
what else they take."""

from __future__ import annotations

from core.attention_heads.retrieval import ModelAnswer, answer_log_probability, bundled_haystack, haystack_of_length, model_answer, retrieval_scores
from ui.cache import cached_language_model, model_turn, run_of
from ui.store import cached


def _language_model(model_name: str):
    lm = cached_language_model(model_name)
    if isinstance(lm, Exception):
        raise lm
    return lm


def cached_haystack(model_name: str, tokens: int) -> str:
    """``core.attention_heads.retrieval.haystack_of_length`` of the bundled haystack in ``model_name``'s tokens."""
    return cached("needle-haystacks", run_of(model_name, (), tokens), lambda: haystack_of_length(
        _language_model(model_name).tokenizer, bundled_haystack(), tokens))


def cached_retrieval(model_name: str, tokens: int, needle: str, question: str, answer: str, depth: float):
    """``core.attention_heads.retrieval.retrieval_scores`` on the bundled haystack cut to ``tokens`` tokens."""
    def compute():
        haystack = cached_haystack(model_name, tokens)
        with model_turn():
            return retrieval_scores(_language_model(model_name), haystack, needle, question, answer, depth)

    return cached("needle-scores", run_of(model_name, (needle, question, answer), tokens), compute, (depth,))


def cached_model_answer(model_name: str, prompt_ids: tuple[int, ...], answer_tokens: int) -> ModelAnswer:
    """``core.attention_heads.retrieval.model_answer``: the model's greedy answer to ``prompt_ids``, long enough for an
    expected answer of ``answer_tokens`` tokens."""
    def compute():
        with model_turn():
            return model_answer(_language_model(model_name), prompt_ids, answer_tokens)

    return cached("needle-answers", run_of(model_name), compute, (prompt_ids, answer_tokens))


def cached_knocked_out(model_name: str, token_ids: tuple[int, ...], answer_span: tuple[int, int],
                       heads: tuple[tuple[int, int], ...]) -> float:
    """``core.attention_heads.retrieval.answer_log_probability`` with ``heads`` knocked out."""
    def compute():
        with model_turn():
            return answer_log_probability(_language_model(model_name), token_ids, answer_span, heads)

    return cached("needle-knock-outs", run_of(model_name, (), None, (heads, "zero")), compute, (token_ids, answer_span))
