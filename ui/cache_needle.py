"""The caches of the needle-in-a-haystack page: retrieval scores, the model's greedy answer and the knock-outs, each
keyed by (model, haystack length, needle, question, answer, depth) and what else they take."""

from __future__ import annotations

from core.retrieval import answer_log_probability, bundled_haystack, haystack_of_length, model_answer, retrieval_scores
from ui.cache import bounded_store, cached_language_model, model_turn

MAX_NEEDLE_RESULTS = 32
MAX_NEEDLE_BYTES = 200_000_000


def _language_model(model_name: str):
    lm = cached_language_model(model_name)
    if isinstance(lm, Exception):
        raise lm
    return lm


def cached_haystack(model_name: str, tokens: int) -> str:
    """``core.retrieval.haystack_of_length`` of the bundled haystack in ``model_name``'s tokens."""
    store = bounded_store("needle-haystacks", MAX_NEEDLE_RESULTS, MAX_NEEDLE_BYTES)
    return store.get_or_compute((model_name, tokens), lambda: haystack_of_length(
        _language_model(model_name).tokenizer, bundled_haystack(), tokens))


def cached_retrieval(model_name: str, tokens: int, needle: str, question: str, answer: str, depth: float):
    """``core.retrieval.retrieval_scores`` on the bundled haystack cut to ``tokens`` tokens."""
    def compute():
        haystack = cached_haystack(model_name, tokens)
        with model_turn():
            return retrieval_scores(_language_model(model_name), haystack, needle, question, answer, depth)

    store = bounded_store("needle-scores", MAX_NEEDLE_RESULTS, MAX_NEEDLE_BYTES)
    return store.get_or_compute((model_name, tokens, needle, question, answer, depth), compute)


def cached_model_answer(model_name: str, prompt_ids: tuple[int, ...]) -> str:
    """``core.retrieval.model_answer``: the model's greedy answer to ``prompt_ids``."""
    def compute():
        with model_turn():
            return model_answer(_language_model(model_name), prompt_ids)

    store = bounded_store("needle-answers", MAX_NEEDLE_RESULTS, MAX_NEEDLE_BYTES)
    return store.get_or_compute((model_name, prompt_ids), compute)


def cached_knocked_out(model_name: str, token_ids: tuple[int, ...], answer_span: tuple[int, int],
                       heads: tuple[tuple[int, int], ...]) -> float:
    """``core.retrieval.answer_log_probability`` with ``heads`` knocked out."""
    def compute():
        with model_turn():
            return answer_log_probability(_language_model(model_name), token_ids, answer_span, heads)

    store = bounded_store("needle-knock-outs", MAX_NEEDLE_RESULTS, MAX_NEEDLE_BYTES)
    return store.get_or_compute((model_name, token_ids, answer_span, heads), compute)
