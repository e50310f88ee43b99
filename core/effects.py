"""Does a head matter? Knock heads out (zero or mean ablation) and measure what changes.

A head's output is its slice of the input to the attention output projection (``d`` =
hidden / heads columns per head, or ``head_dim``): BERT-style ``attention.output.dense``, DistilBERT
``attention.out_lin``, GPT-2 ``attn.c_proj``, and ``o_proj`` of decoders recorded through
``core.recording`` (Llama, Mistral, Qwen, Gemma, Phi-3 …). Ablating head ``h`` of layer ``l`` replaces that
slice before the projection: by 0 (``"zero"``; the projection's shared bias still applies) or by
the slice's mean over the text's tokens in the same forward pass (``"mean"``).

transformers 5 has no ``head_mask``, so this is done with forward pre-hooks. They are
registered inside a context manager that always removes them, and they act only in the
thread that registered them: a model is shared by every session through the cache, and
another user's forward pass running at the same time must never see the ablation.

Measures (one number per ablated run):

- ``"embedding"``: 1 − cosine between the original and the ablated sentence embedding, the
  mean of the last hidden state over the tokens (the sentence-transformers pooling).
- ``"target"``: the drop in log-probability of a target token (models with a language-model
  head): at the first mask token of a masked LM, or after the last token of a causal LM.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from core.heads import SUPPORTED, UnsupportedArchitecture
from core.inference import Analysis, AnalysisError, analyze
from core.models import LoadedModel
from core.predictions import LanguageModel
from core.recorded_heads import out_projections as recorded_out_projections
from core.recording import is_recordable
from core.tokens import decoded_tokens, quoted_token

Method = Literal["zero", "mean"]
Measure = Literal["embedding", "target"]
METHODS = ("zero", "mean")
MEASURES = ("embedding", "target")
# Tokens per forward pass when several ablated copies of a text run together.
TOKENS_PER_BATCH = 4096


class EffectsError(AnalysisError):
    """A knock-out or attribution request that cannot be met. The message is a sentence for the user."""


@dataclass(frozen=True)
class Network:
    """What the effect computations need from a ``LoadedModel`` or a ``LanguageModel``.

    ``full``: the module to call (with its language-model head when there is one);
    ``base``: the transformer inside it; ``kind``: "masked", "next" or None (no head);
    ``out_projections``: per layer, the module whose input holds the heads' outputs side by side;
    ``blocks``: the transformer blocks (``blocks[l]`` reads ``hidden_states[l]`` as its first argument).
    """

    name: str
    tokenizer: Any
    full: torch.nn.Module
    base: torch.nn.Module
    kind: Literal["masked", "next"] | None
    device: str
    max_tokens: int
    num_layers: int
    num_heads: int
    hidden_size: int
    out_projections: tuple[torch.nn.Module, ...]
    blocks: tuple[torch.nn.Module, ...]

    @property
    def head_dim(self) -> int:
        """Width of one head's slice of the output projection's input (``config.head_dim`` when it has one)."""
        return self.out_projections[0].in_features // self.num_heads if hasattr(self.out_projections[0], "in_features") \
            else self.hidden_size // self.num_heads


def _out_projections(base: torch.nn.Module, model_type: str) -> tuple[tuple[torch.nn.Module, ...], tuple[torch.nn.Module, ...]]:
    """(blocks, output projections), one of each per layer."""
    if is_recordable(base):
        found = recorded_out_projections(base)
        if found is not None:
            return found
    encoder = getattr(base, "encoder", None)
    if encoder is not None and hasattr(encoder, "layer"):
        blocks = tuple(encoder.layer)
        if blocks and all(hasattr(b, "attention") and hasattr(b.attention, "output") for b in blocks):
            return blocks, tuple(b.attention.output.dense for b in blocks)
    transformer = getattr(base, "transformer", None)
    if transformer is not None and hasattr(transformer, "layer"):
        blocks = tuple(transformer.layer)
        if blocks and all(hasattr(getattr(b, "attention", None), "out_lin") for b in blocks):
            return blocks, tuple(b.attention.out_lin for b in blocks)
    if hasattr(base, "h"):
        blocks = tuple(base.h)
        if blocks and all(hasattr(getattr(b, "attn", None), "c_proj") for b in blocks):
            return blocks, tuple(b.attn.c_proj for b in blocks)
    raise UnsupportedArchitecture(
        f"Knocking out heads is not available for {model_type} models: the app finds each head's output "
        f"only in {SUPPORTED}."
    )


def network(model: LoadedModel | LanguageModel) -> Network:
    """The parts of ``model`` the effect computations use. Raises ``UnsupportedArchitecture``."""
    full = model.model
    base = full.base_model if isinstance(model, LanguageModel) else full
    config = full.config
    blocks, projections = _out_projections(base, config.model_type)
    heads = int(config.num_attention_heads)
    hidden = int(getattr(config, "hidden_size", 0) or getattr(config, "dim", 0))
    if heads < 1 or (hidden % heads and not is_recordable(base)):
        raise UnsupportedArchitecture(f"{config.model_type} models do not split their hidden size evenly into heads.")
    return Network(
        name=model.name,
        tokenizer=model.tokenizer,
        full=full,
        base=base,
        kind=model.kind if isinstance(model, LanguageModel) else None,
        device=model.device,
        max_tokens=model.max_tokens,
        num_layers=len(projections),
        num_heads=heads,
        hidden_size=hidden,
        out_projections=projections,
        blocks=blocks,
    )


def check_supported(model: LoadedModel | LanguageModel) -> None:
    """Raise ``UnsupportedArchitecture`` (a sentence) unless heads of ``model`` can be knocked out."""
    network(model)


def _check_heads(net: Network, heads: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    checked = []
    for layer, head in heads:
        if not (0 <= int(layer) < net.num_layers and 0 <= int(head) < net.num_heads):
            raise EffectsError(
                f"There is no head {head} in layer {layer}: this model has layers 0–{net.num_layers - 1} "
                f"and heads 0–{net.num_heads - 1}."
            )
        checked.append((int(layer), int(head)))
    return sorted(set(checked))


@contextmanager
def _ablation_hooks(net: Network, rows: Sequence[Sequence[tuple[int, int]]], method: Method) -> Iterator[None]:
    """Ablate ``rows[b]`` in batch row ``b`` (one row broadcasts to every row of the batch).

    The hooks act only in the calling thread and are removed on leaving, whatever happens inside.
    """
    if method not in METHODS:
        raise EffectsError(f"The ablation must be one of {', '.join(METHODS)}, not {method!r}.")
    d = net.head_dim
    owner = threading.get_ident()
    keeps: dict[int, torch.Tensor] = {}
    for b, heads in enumerate(rows):
        for layer, head in heads:
            if layer not in keeps:
                keeps[layer] = torch.ones(len(rows), 1, d * net.num_heads, device=net.device)
            keeps[layer][b, 0, head * d : (head + 1) * d] = 0.0

    def make_hook(keep: torch.Tensor):
        def hook(_module, args):
            if threading.get_ident() != owner:
                return None
            x = args[0]
            k = keep.to(x.dtype)
            if method == "zero":
                replaced = x * k
            else:
                replaced = x * k + (1.0 - k) * x.mean(dim=-2, keepdim=True)
            return (replaced, *args[1:])

        return hook

    handles = []
    try:
        for layer, keep in keeps.items():
            handles.append(net.out_projections[layer].register_forward_pre_hook(make_hook(keep)))
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def _copies_from(block: torch.nn.Module, copies: int) -> Iterator[None]:
    """Inside this block, a batch of one entering ``block`` (in this thread) leaves it as ``copies`` rows.

    The blocks before it run once for all copies: an ablation at this layer cannot change them.
    Masks and positions keep their batch of one and broadcast.
    """
    owner = threading.get_ident()

    def hook(_module, args):
        if threading.get_ident() != owner or args[0].shape[0] != 1:
            return None
        return (args[0].expand(copies, *args[0].shape[1:]).contiguous(), *args[1:])

    handle = block.register_forward_pre_hook(hook)
    try:
        yield
    finally:
        handle.remove()


@contextmanager
def ablation(model: LoadedModel | LanguageModel, heads: Iterable[tuple[int, int]], *, method: Method = "zero") -> Iterator[None]:
    """Inside this block, every forward pass of ``model`` in this thread runs with ``heads`` ablated.

    ``heads``: ``(layer, head)`` pairs. The hooks are removed on leaving, also after an exception.
    """
    net = network(model)
    with _ablation_hooks(net, [_check_heads(net, heads)], method):
        yield


def ablate_heads(
    model: LoadedModel, text: str, heads: Iterable[tuple[int, int]], *, method: Method = "zero", max_tokens: int | None = None
) -> Analysis:
    """The ``Analysis`` of ``text`` with ``heads`` ablated (``method``: "zero" or "mean").

    With no heads it equals ``analyze(model, text)``. Raises ``UnsupportedArchitecture``,
    ``EffectsError`` for a head the model does not have, ``AnalysisError`` for empty text.
    """
    with ablation(model, heads, method=method):
        return analyze(model, text, max_tokens=max_tokens)


# --- measures --------------------------------------------------------------------------------


def encode(net: Network, text: str, max_tokens: int | None = None) -> dict[str, torch.Tensor]:
    """The model inputs for ``text`` (batch of 1), truncated to the model's (or a lower) limit."""
    if not isinstance(text, str) or not text.strip():
        raise AnalysisError("There is no text to analyse: type a sentence first.")
    limit = net.max_tokens if max_tokens is None else max(1, min(int(max_tokens), net.max_tokens))
    encoding = net.tokenizer(text, truncation=True, max_length=limit, return_tensors="pt")
    inputs = {"input_ids": encoding["input_ids"], "attention_mask": encoding["attention_mask"]}
    if "token_type_ids" in encoding and "token_type_ids" in net.tokenizer.model_input_names:
        inputs["token_type_ids"] = encoding["token_type_ids"]
    if inputs["input_ids"].shape[1] == 0:
        raise AnalysisError("The tokenizer produced no tokens for this text.")
    return {k: v.to(net.device) for k, v in inputs.items()}


@dataclass(frozen=True)
class Target:
    """Where and what a language model predicts: the logits at token ``position`` are read for ``token_id``.

    ``position``: the first mask token (masked LMs) or the last token (causal LMs: the token after the text).
    """

    position: int
    token_id: int
    token: str


def target_position(net: Network, input_ids: torch.Tensor) -> int:
    """Which position's logits the "target" measure reads (see ``Target``)."""
    if net.kind is None:
        raise EffectsError(f"`{net.name}` has no language-model head, so there is no target token to measure.")
    ids = input_ids[0]
    if net.kind == "next":
        return len(ids) - 1
    masks = torch.nonzero(ids == net.tokenizer.mask_token_id).flatten()
    if not len(masks):
        raise EffectsError(
            f"The text has no {net.tokenizer.mask_token}: put it where a word should be, and the target is what the "
            "model predicts there."
        )
    return int(masks[0])


def target_token_id(tokenizer, target: str | int, vocab_size: int) -> int:
    """The id of ``target`` (a token id, or a text that must be exactly one token). Raises ``EffectsError``."""
    if isinstance(target, (int, np.integer)):
        if not 0 <= int(target) < vocab_size:
            raise EffectsError(f"Token id {target} is not in the vocabulary (0–{vocab_size - 1}).")
        return int(target)
    ids = tokenizer(str(target), add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        pieces = [quoted_token(t) for t in decoded_tokens(tokenizer, ids)]
        raise EffectsError(
            f"The target “{target}” is {len(ids)} tokens ({', '.join(pieces) or 'none'}); give a single token "
            "(for GPT-2, a word usually starts with a space)."
        )
    return int(ids[0])


def resolve_target(net: Network, inputs: dict[str, torch.Tensor], target: str | int | None) -> Target:
    """``target`` as one token id at ``target_position``; ``None`` means the model's own top prediction."""
    position = target_position(net, inputs["input_ids"])
    tok = net.tokenizer
    if target is None:
        with torch.inference_mode():
            logits = net.full(**inputs).logits[0, position]
        token_id = int(logits.argmax())
    else:
        token_id = target_token_id(tok, target, net.full.config.vocab_size)
    return Target(position, token_id, tok.decode([token_id], clean_up_tokenization_spaces=False))


def mean_pooled(last_hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """``[B, hidden]``: the mean of ``last_hidden`` ``[B, T, hidden]`` over the tokens the mask keeps."""
    mask = attention_mask[..., None].to(last_hidden.dtype)
    return (last_hidden * mask).sum(-2) / mask.sum(-2).clamp(min=1.0)


def _no_cache(module: torch.nn.Module) -> dict:
    """``use_cache=False`` for models that take it (a decoder's key/value cache is not needed here)."""
    return {"use_cache": False} if "use_cache" in inspect.signature(module.forward).parameters else {}


def _measure_outputs(net: Network, inputs: dict[str, torch.Tensor], measure: Measure, target: Target | None) -> torch.Tensor:
    """Per batch row: the pooled last hidden state ``[B, hidden]`` ("embedding") or the
    target's log-probability ``[B]`` ("target")."""
    if measure == "embedding":
        out = net.base(**inputs, **_no_cache(net.base), return_dict=True)
        return mean_pooled(out.last_hidden_state, inputs["attention_mask"])
    assert target is not None
    logits = net.full(**inputs, **_no_cache(net.full), return_dict=True).logits[:, target.position]
    return logits.double().log_softmax(-1)[:, target.token_id]


def _check_measure(net: Network, measure: str) -> None:
    if measure not in MEASURES:
        raise EffectsError(f"The measure must be one of {', '.join(MEASURES)}, not {measure!r}.")
    if measure == "target" and net.kind is None:
        raise EffectsError(f"`{net.name}` has no language-model head: measure the sentence embedding instead.")


def head_importance(
    model: LoadedModel | LanguageModel,
    text: str,
    *,
    measure: Measure = "embedding",
    method: Method = "zero",
    target: str | int | None = None,
    progress: Callable[[int, int], None] | None = None,
    max_tokens: int | None = None,
) -> np.ndarray:
    """float32 ``[layers, heads]``: the effect of ablating each head alone.

    ``measure="embedding"``: 1 − cosine(original, ablated) of the mean-pooled last hidden state;
    ``measure="target"`` (``model`` a ``LanguageModel``): log p(target) original − ablated, where
    ``target`` is a token string or id (None: the model's own top prediction) at the first mask
    token or after the last token. Several ablated copies of the text run per forward pass, all
    knocking out heads of one layer, so the layers below it run once for all of them (a head
    cannot change what comes before it); ``progress(done, total)`` is called after each pass.
    """
    net = network(model)
    _check_measure(net, measure)
    inputs = encode(net, text, max_tokens)
    resolved = resolve_target(net, inputs, target) if measure == "target" else None
    tokens = inputs["input_ids"].shape[1]
    batch = max(1, min(net.num_heads, TOKENS_PER_BATCH // tokens))
    total = net.num_layers * net.num_heads
    result = np.zeros((net.num_layers, net.num_heads), dtype=np.float32)
    done = 0
    with torch.inference_mode():
        reference = _measure_outputs(net, inputs, measure, resolved)
        for layer in range(net.num_layers):
            for start in range(0, net.num_heads, batch):
                chunk = [(layer, head) for head in range(start, min(start + batch, net.num_heads))]
                with _copies_from(net.blocks[layer], len(chunk)), _ablation_hooks(net, [[h] for h in chunk], method):
                    ablated = _measure_outputs(net, inputs, measure, resolved)
                if ablated.shape[0] != len(chunk):
                    raise RuntimeError(f"expected {len(chunk)} ablated copies, the model returned {ablated.shape[0]}")
                if measure == "embedding":
                    cosine = torch.nn.functional.cosine_similarity(ablated.double(), reference.double(), dim=-1)
                    effect = 1.0 - cosine
                else:
                    effect = reference - ablated
                result[layer, start : start + len(chunk)] = effect.cpu().numpy()
                done += len(chunk)
                if progress is not None:
                    progress(done, total)
    return result
