"""Where the parts of a causal language model are: blocks, each attention's output projection, MLPs, final norm.

One lookup for decoder families built like GPT-2 (``transformer.h``, ``attn.c_proj``, ``ln_f``) or like Llama,
Mistral, Qwen, Gemma, Phi-3 (``model.layers``, ``self_attn.o_proj``, ``model.norm``). Patching and direct logit
attribution work through public module hooks on these parts, never by changing a library's code.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from core.heads import UnsupportedArchitecture
from core.predictions import LanguageModel
from core.tokens import decoded_tokens, quoted_token

SUPPORTED = "causal language models built like GPT-2 or Llama (Llama, Mistral, Qwen, Gemma, Phi-3, SmolLM)"


@dataclass(frozen=True)
class Parts:
    """``blocks[l]``: block ``l`` (its input is ``hidden_states[l]``); ``out_proj[l]``: the module whose input is the
    heads' outputs side by side ``[B, T, heads * head_dim]``; ``mlps[l]``; ``final_norm``; ``heads``, ``head_dim``."""

    blocks: Sequence[torch.nn.Module]
    out_proj: Sequence[torch.nn.Module]
    mlps: Sequence[torch.nn.Module]
    final_norm: torch.nn.Module
    heads: int
    head_dim: int

    @property
    def layers(self) -> int:
        return len(self.blocks)


def parts_of(lm: LanguageModel) -> Parts:
    """The parts of ``lm``'s causal LM; raises ``UnsupportedArchitecture`` (a sentence) for other layouts."""
    full = lm.model
    config = full.config
    base = getattr(full, "transformer", None) or getattr(full, "model", None)
    if lm.kind != "next" or base is None:
        raise UnsupportedArchitecture(f"This needs a causal language model; it supports {SUPPORTED}.")
    heads = int(getattr(config, "num_attention_heads", 0) or getattr(config, "n_head", 0))
    if hasattr(base, "h") and hasattr(base, "ln_f"):  # GPT-2
        blocks = list(base.h)
        out_proj = [b.attn.c_proj for b in blocks]
        return Parts(blocks, out_proj, [b.mlp for b in blocks], base.ln_f, heads, config.hidden_size // heads)
    if hasattr(base, "layers") and hasattr(base, "norm"):
        blocks = list(base.layers)
        if all(hasattr(getattr(b, "self_attn", None), "o_proj") and hasattr(b, "mlp") for b in blocks):
            head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
            out_proj = [b.self_attn.o_proj for b in blocks]
            return Parts(blocks, out_proj, [b.mlp for b in blocks], base.norm, heads, int(head_dim))
    raise UnsupportedArchitecture(f"This is not available for {config.model_type} models; it supports {SUPPORTED}.")


@contextmanager
def hooked(hooks: Sequence[tuple[torch.nn.Module, str, object]]) -> Iterator[None]:
    """Register ``(module, "pre" | "forward", fn)`` hooks for the block's duration; always removed."""
    handles = []
    try:
        for module, kind, fn in hooks:
            if kind == "pre":
                handles.append(module.register_forward_pre_hook(fn, with_kwargs=True))
            else:
                handles.append(module.register_forward_hook(fn))
        yield
    finally:
        for handle in handles:
            handle.remove()


def first_tensor(args: tuple, kwargs: dict, name: str = "hidden_states") -> tuple[torch.Tensor, bool]:
    """A pre-hook's main input and whether it came positionally (Llama blocks get it as a keyword)."""
    if args:
        return args[0], True
    return kwargs[name], False


def replace_first(args: tuple, kwargs: dict, value: torch.Tensor, positional: bool, name: str = "hidden_states"):
    """The ``(args, kwargs)`` a pre-hook returns to hand ``value`` on as the main input."""
    if positional:
        return (value, *args[1:]), kwargs
    return args, {**kwargs, name: value}


def single_token(tokenizer, token: str | int, what: str) -> int:
    """The id of ``token`` (an id, or a text that must be exactly one token); raises ``ValueError`` with a sentence."""
    if isinstance(token, int):
        return token
    ids = tokenizer(token, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        pieces = " | ".join(quoted_token(t) for t in decoded_tokens(tokenizer, ids))
        raise ValueError(f"The {what} {token!r} is {len(ids)} tokens ({pieces}), not one; choose a single token "
                         "(often a word with its leading space, such as ' Mary').")
    return ids[0]


def encode(lm: LanguageModel, text: str, max_tokens: int | None = None) -> torch.Tensor:
    """``text``'s token ids ``[T]`` as the tokenizer makes them (special tokens included), on ``lm``'s device; the
    first ``max_tokens`` of them (default and ceiling: the model's limit)."""
    limit = lm.max_tokens if max_tokens is None else max(1, min(int(max_tokens), lm.max_tokens))
    ids = lm.tokenizer(text, truncation=True, max_length=limit, return_tensors="pt")["input_ids"][0]
    if len(ids) == 0:
        raise ValueError("The text has no tokens; type a few words.")
    return ids.to(lm.device)
