"""A causal language model's parts (``core.model.parts``, checked for what patching, direct logit attribution and the
logit lens need) and its prompts as token ids.
"""

from __future__ import annotations

import torch

from core.errors import AnalysisError
from core.model.parts import ModelParts, parts_of
from core.model.recording import UnsupportedArchitecture
from core.model.tokens import decoded_tokens, quoted_token
from core.outputs.predictions import LanguageModel

SUPPORTED = "causal language models built like GPT-2 or Llama (Llama, Mistral, Qwen, Gemma, Phi-3, SmolLM)"


def causal_parts(lm: LanguageModel) -> ModelParts:
    """``parts_of(lm.model)`` for a causal LM with a final norm and an MLP module per block; raises
    ``UnsupportedArchitecture`` (a sentence) otherwise."""
    if lm.kind != "next":
        raise UnsupportedArchitecture(f"This needs a causal language model; it supports {SUPPORTED}.")
    try:
        parts = parts_of(lm.model)
    except UnsupportedArchitecture as err:
        raise UnsupportedArchitecture(f"This is not available for {lm.model.config.model_type} models; it supports "
                                      f"{SUPPORTED}.") from err
    if parts.final_norm is None or any(p.mlp is None for p in parts.layers):
        raise UnsupportedArchitecture(f"This is not available for {lm.model.config.model_type} models; it supports "
                                      f"{SUPPORTED}.")
    return parts


def single_token(tokenizer, token: str | int, what: str) -> int:
    """The id of ``token`` (an id, or a text that must be exactly one token); raises ``AnalysisError`` with a sentence."""
    if isinstance(token, int):
        return token
    ids = tokenizer(token, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        pieces = " | ".join(quoted_token(t) for t in decoded_tokens(tokenizer, ids))
        raise AnalysisError(f"The {what} {token!r} is {len(ids)} tokens ({pieces}), not one; choose a single token "
                         "(often a word with its leading space, such as ' Mary').")
    return ids[0]


def encode(lm: LanguageModel, text: str, max_tokens: int | None = None) -> torch.Tensor:
    """``text``'s token ids ``[T]`` as the tokenizer makes them (special tokens included), on ``lm``'s device; the
    first ``max_tokens`` of them (default and ceiling: the model's limit)."""
    limit = lm.max_tokens if max_tokens is None else max(1, min(int(max_tokens), lm.max_tokens))
    ids = lm.tokenizer(text, truncation=True, max_length=limit, return_tensors="pt")["input_ids"][0]
    if len(ids) == 0:
        raise AnalysisError("The text has no tokens; type a few words.")
    return ids.to(lm.device)
