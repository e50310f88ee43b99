"""The trace of a prompt given as token ids (``record_ids``): a prompt built piece by piece (Needle's haystack, needle,
question and answer, each tokenised on its own) is read as those ids, not as its text tokenised again.

``core.model.trace.record`` reads a text through ``model.tokenizer``; ``record_ids`` hands it a tokenizer that reads
the ids' own text as exactly those ids (``GivenIds``: every other name is the model's tokenizer's), so the pass, the
trace and what it keeps are ``record``'s own. The text is the ids' tokens decoded one by one and joined, each
token's offsets its piece of it; a special token (the tokenizer's BOS …) has no text, offsets ``(0, 0)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from core.errors import AnalysisError
from core.model.analysis import special_token_ids
from core.model.models import LoadedModel
from core.model.trace import Trace, record


class GivenIds:
    """``tokenizer`` but for its call, which reads ``text`` as ``ids`` (with their ``offsets`` and special mask)."""

    def __init__(self, tokenizer, text: str, ids: list[int], offsets: list[tuple[int, int]], special: list[int]):
        self._tokenizer, self._text, self._ids, self._offsets, self._special = tokenizer, text, ids, offsets, special

    def __getattr__(self, name: str):
        return getattr(self._tokenizer, name)

    def __call__(self, text: str, *, truncation: bool = False, max_length: int | None = None, **_options) -> dict:
        if text != self._text:
            raise ValueError("GivenIds reads only the text of its ids")
        n = min(len(self._ids), max_length) if truncation and max_length is not None else len(self._ids)
        return {"input_ids": self._ids[:n], "attention_mask": [1] * n, "offset_mapping": self._offsets[:n],
                "special_tokens_mask": self._special[:n]}


def record_ids(model: LoadedModel, ids: Sequence[int]) -> Trace:
    """``record(model, text)`` of the prompt whose token ids are ``ids`` (special tokens included, as the model reads
    them; at most the model's limit): the model runs once over exactly those ids (module docstring)."""
    ids = [int(i) for i in ids]
    if not ids:
        raise AnalysisError("The prompt has no tokens.")
    if len(ids) > model.max_tokens:
        raise AnalysisError(f"The prompt is {len(ids):,} tokens, more than {model.name}'s {model.max_tokens:,}.")
    special = special_token_ids(model.tokenizer)
    pieces = model.tokenizer.batch_decode([[i] for i in ids], clean_up_tokenization_spaces=False)
    text, offsets = "", []
    for token, piece in zip(ids, pieces, strict=True):
        if token in special:
            offsets.append((0, 0))
        else:
            offsets.append((len(text), len(text) + len(piece)))
            text += piece
    given = GivenIds(model.tokenizer, text, ids, offsets, [int(i in special) for i in ids])
    return record(replace(model, tokenizer=given), text)
