"""Tiny random causal language models (Llama with grouped-query heads, GPT-2) with their heads saved.

The Llama reuses ``build_tiny_gpt2``'s byte-level BPE tokenizer (trained here, offline).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import GPT2TokenizerFast, LlamaConfig, LlamaForCausalLM

from tests.model_factory import build_tiny_gpt2


def build_tiny_llama_lm(folder: Path, *, layers: int = 2, heads: int = 4, kv_heads: int = 2, hidden: int = 32,
                        seed: int = 0) -> Path:
    """A random 2-layer Llama causal LM (4 query heads sharing 2 key/value heads, rotary, RMSNorm, untied head)."""
    build_tiny_gpt2(folder, seed=seed)
    tokenizer = GPT2TokenizerFast.from_pretrained(folder)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=64,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False,
        rms_norm_eps=1e-5,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # a random RMSNorm gain of 1 everywhere would hide a wrong scale; make it uneven
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(1 + 0.5 * torch.randn_like(param))
    for stale in folder.glob("*.safetensors"):
        stale.unlink()
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def tiny_lm(request, tmp_path_factory):
    """A tiny random causal LM with its head: a Llama (grouped-query heads) and a GPT-2."""
    from core.model.models import load_model
    from core.outputs.predictions import load_language_model
    from tests.model_factory import build_tiny_gpt2_lm

    build = build_tiny_llama_lm if request.param == "llama" else build_tiny_gpt2_lm
    folder = build(tmp_path_factory.mktemp("models") / f"tiny-{request.param}-lm")
    return load_language_model(load_model(str(folder)))


def token_id(lm, token: str) -> int:
    """The id of ``token``, which must be a single token of ``lm``'s tokenizer."""
    (i,) = lm.tokenizer(token, add_special_tokens=False)["input_ids"]
    return i


def logit_difference(lm, ids, answer: str, wrong: str, hook_module=None, hook=None, *, pre: bool = False) -> float:
    """logit(answer) − logit(wrong) at the last position of a plain forward pass of ``lm.model`` over ``ids``
    ``[1, T]``, with ``hook`` on ``hook_module`` for that pass (a forward pre-hook when ``pre``)."""
    handle = None
    if hook_module is not None:
        handle = hook_module.register_forward_pre_hook(hook) if pre else hook_module.register_forward_hook(hook)
    try:
        with torch.no_grad():
            logits = lm.model(input_ids=ids).logits[0, -1].double()
    finally:
        if handle is not None:
            handle.remove()
    return float(logits[token_id(lm, answer)] - logits[token_id(lm, wrong)])
