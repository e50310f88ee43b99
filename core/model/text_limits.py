"""What every pass over a text checks first, shared by one-stack passes (``core.model.inference``), encoder-decoder
passes (``core.model.seq2seq``, ``core.model.trace``) and the causal tools that tokenise a text themselves
(``core.causal.flow``): a leaf below them all, so none of them imports another for it.
"""

from __future__ import annotations

from core.errors import AnalysisError
from core.model.models import LoadedModel


def token_limit(model: LoadedModel, max_tokens: int | None) -> int:
    """The number of tokens to keep: ``max_tokens`` capped at the model's own limit.

    A tokenizer cannot cut a text below the special tokens it adds ([CLS] and [SEP] for BERT),
    so a limit that leaves no room for one token of text is refused with a sentence.
    """
    limit = model.max_tokens if max_tokens is None else min(int(max_tokens), model.max_tokens)
    floor = model.tokenizer.num_special_tokens_to_add(pair=False) + 1
    if limit < floor:
        added = floor - 1
        raise AnalysisError(
            f"The token limit is {limit}, but {model.name} adds {added} special token{'s' if added != 1 else ''} "
            f"to every text, so it needs a limit of at least {floor} to read one token of it. "
            f"Raise the token limit (EXPLORER_MAX_TOKENS) to {floor} or more."
        )
    return limit


def check_text(text: str) -> None:
    """Refuse, with a sentence, a text with nothing to read (not a string, empty or only blanks)."""
    if not isinstance(text, str) or not text.strip():
        raise AnalysisError("There is no text to analyse: type a sentence first.")
