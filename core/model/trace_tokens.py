"""The tokens a trace read (``core.model.trace``): a text through the tokenizer, or token ids as given.

``text_inputs`` tokenizes a text as every page does (cut to a limit, special tokens added, offsets into the text);
``ids_inputs`` takes token ids as they are (a test sequence that is no text, such as the induction test's repeated
random tokens): nothing added, nothing cut, and the sequence's text is the ids decoded one at a time and joined, each
token's span its own piece of that text (a special token's none, ``(0, 0)``, as a tokenizer's offsets give it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.errors import AnalysisError
from core.model.analysis import special_token_ids
from core.model.models import LoadedModel
from core.model.words import text_word_ids


@dataclass(frozen=True, eq=False)
class TokenSequence:
    """One text's tokens as the model read them (special tokens included)."""

    text: str
    tokens: tuple[str, ...]
    ids: tuple[int, ...]
    offsets: tuple[tuple[int, int], ...]
    special_mask: np.ndarray
    word_ids: tuple[int | None, ...]
    truncated: bool
    num_input_tokens: int

    def __len__(self) -> int:
        return len(self.ids)


def token_sequence(model: LoadedModel, text: str, full: int, ids, offsets, added) -> TokenSequence:
    """The tokens of ``text`` as the model read them; its words from the text itself (``core.model.words``).
    ``full``: the tokens of the uncut text; ``added``: per token, whether the tokenizer added it (a special token)."""
    special = np.fromiter(special_token_ids(model.tokenizer), dtype=np.int64)
    mask = np.asarray(added, dtype=bool) | np.isin(np.asarray(ids, dtype=np.int64), special)
    mask.setflags(write=False)
    spans = tuple(tuple(int(x) for x in o) for o in offsets)
    return TokenSequence(text, tuple(model.tokenizer.convert_ids_to_tokens(list(ids))), tuple(int(i) for i in ids),
                         spans, mask, tuple(text_word_ids(text, spans, mask.tolist())), full > len(ids), full)


def text_inputs(model: LoadedModel, text: str, limit: int) -> tuple[dict[str, torch.Tensor], TokenSequence]:
    """The model's inputs ``[1, T]`` and the token sequence of ``text`` cut to ``limit`` tokens. Lists from the tokenizer
    (its tensors of offsets cost more than the rest); the uncut text is tokenized again only when the cut one is full."""
    encoding = model.tokenizer(text, truncation=True, max_length=limit, return_offsets_mapping=True,
                               return_special_tokens_mask=True)
    ids = encoding["input_ids"]
    if not ids:
        raise AnalysisError("The tokenizer produced no tokens for this text.")
    full = len(model.tokenizer(text, truncation=False)["input_ids"]) if len(ids) >= limit else len(ids)
    sequence = token_sequence(model, text, full, ids, encoding["offset_mapping"], encoding["special_tokens_mask"])
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if "token_type_ids" in encoding
                                               and "token_type_ids" in model.tokenizer.model_input_names else [])
    return {name: torch.tensor([encoding[name]]) for name in names}, sequence


def ids_inputs(model: LoadedModel, ids) -> tuple[dict[str, torch.Tensor], TokenSequence]:
    """The model's inputs ``[1, T]`` for the token ids ``ids`` as given, and their sequence (module docstring). Raises
    ``AnalysisError`` for no ids, an id outside the vocabulary, or more ids than the model reads."""
    ids = [int(i) for i in (ids.tolist() if isinstance(ids, torch.Tensor | np.ndarray) else ids)]
    vocabulary = int(model.model.get_input_embeddings().num_embeddings)
    if not ids:
        raise AnalysisError("There are no tokens to read.")
    if not all(0 <= i < vocabulary for i in ids):
        raise AnalysisError(f"A token id is outside {model.name}'s vocabulary of {vocabulary} tokens.")
    if len(ids) > model.max_tokens:
        raise AnalysisError(f"{len(ids)} tokens is more than {model.name} reads at once ({model.max_tokens}).")
    special = set(special_token_ids(model.tokenizer))
    text, offsets = "", []
    for i in ids:
        piece = "" if i in special else model.tokenizer.decode([i], clean_up_tokenization_spaces=False)
        offsets.append((len(text), len(text) + len(piece)) if piece else (0, 0))
        text += piece
    sequence = token_sequence(model, text, len(ids), ids, offsets, [i in special for i in ids])
    tensor = torch.tensor([ids])
    return {"input_ids": tensor, "attention_mask": torch.ones_like(tensor)}, sequence
