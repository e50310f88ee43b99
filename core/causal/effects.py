"""Does a head matter? Knock heads out (zero or mean ablation) and measure what changes.

A head's output is what it hands the attention output projection: its ``d``-wide slice of the projection's input
(``d`` = ``config.head_dim``, or hidden / heads). Ablating head ``h`` of layer ``l`` replaces that slice before the
projection: by 0 (``"zero"``; the projection's shared bias still applies) or by the slice's mean over the text's tokens
in the same forward pass (``"mean"``).

transformers 5 has no ``head_mask``: the ablation is an intervention (``core.model.intervention``: ``replace_heads``, and
``batch_copies`` for several ablated copies of a text in one pass), acting in that ``with`` block and the calling thread
only (a model is shared by every session through the cache, and another user's pass running at the same time never
sees the ablation). The model's parts come from ``core.model.parts.parts_of``.

Measures (one number per ablated run):

- ``"embedding"``: 1 − cosine between the original and the ablated sentence embedding, the
  mean of the last hidden state over the tokens (the sentence-transformers pooling).
- ``"target"``: the drop in log-probability of a target token (models with a language-model
  head): at the first mask token of a masked LM, or after the last token of a causal LM.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from core.attention_heads.inside_head import SUPPORTED
from core.errors import AnalysisError
from core.model.analysis import Analysis
from core.model.attention_layers import SINGLE_STACK
from core.model.inference import analyze
from core.model.intervention import Intervention, batch_copies, intervened, replace_heads
from core.model.layers import head_code
from core.model.models import LoadedModel
from core.model.parts import ModelParts, parts_of
from core.model.recording import UnsupportedArchitecture
from core.model.tokens import decoded_tokens, quoted_token
from core.outputs.predictions import LanguageModel, keeps_logits

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
    ``parts``: where its blocks and output projections are (``core.model.parts``);
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
    parts: ModelParts

    @property
    def head_dim(self) -> int:
        """Width of one head's slice of the output projection's input (``config.head_dim`` when it has one)."""
        return self.parts.head_dim

    @property
    def blocks(self) -> list[torch.nn.Module]:
        return self.parts.blocks


def network(model: LoadedModel | LanguageModel) -> Network:
    """The parts of ``model`` the effect computations use. Raises ``UnsupportedArchitecture``."""
    full = model.model
    base = full.base_model if isinstance(model, LanguageModel) else full
    config = full.config
    try:
        parts = parts_of(full)
    except UnsupportedArchitecture as err:
        raise UnsupportedArchitecture(
            f"Knocking out heads is not available for {config.model_type} models: the app finds each head's output "
            f"only in {SUPPORTED}."
        ) from err
    if SINGLE_STACK not in parts.stacks:
        raise UnsupportedArchitecture(f"Knocking out heads is not available for {config.model_type} models yet: "
                                      "they have an encoder and a decoder.")
    hidden = int(getattr(config, "hidden_size", 0) or getattr(config, "dim", 0))
    return Network(
        name=model.name,
        tokenizer=model.tokenizer,
        full=full,
        base=base,
        kind=model.kind if isinstance(model, LanguageModel) else None,
        device=model.device,
        max_tokens=model.max_tokens,
        num_layers=len(parts.layers),
        num_heads=parts.heads,
        hidden_size=hidden,
        parts=parts,
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


def _knock_outs(rows: Sequence[Sequence[tuple[int, int]]], method: Method) -> Intervention:
    """The intervention that ablates ``rows[b]`` in batch row ``b`` (one row: in every row of the batch)."""
    if method not in METHODS:
        raise EffectsError(f"The ablation must be one of {', '.join(METHODS)}, not {method!r}.")
    if len(rows) == 1:
        return replace_heads(rows[0], method)
    by_head: dict[tuple[int, int], list[int]] = {}
    for b, heads in enumerate(rows):
        for layer, head in heads:
            by_head.setdefault((layer, head), []).append(b)
    return sum((replace_heads([key], method, rows=tuple(batch_rows)) for key, batch_rows in by_head.items()), Intervention())


@contextmanager
def ablation(model: LoadedModel | LanguageModel, heads: Iterable[tuple[int, int]], *, method: Method = "zero") -> Iterator[None]:
    """Inside this block, every forward pass of ``model`` in this thread runs with ``heads`` ablated.

    ``heads``: ``(layer, head)`` pairs. Nothing is left changed on leaving, also after an exception.
    """
    net = network(model)
    with intervened(net.full, _knock_outs([_check_heads(net, heads)], method)):
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


HEAD_SEPARATORS = re.compile(r"[\s,;]+")


def parse_head_codes(typed: str, num_layers: int, num_heads: int) -> tuple[tuple[tuple[int, int], ...], list[str]]:
    """The heads ``typed`` names (codes such as ``L0H2``, ``core.model.layers.head_code``, in any case, separated by
    spaces, commas or semicolons) as ``(layer, head)`` pairs, each once in the order given, and the parts that name
    no head of a model of ``num_layers`` × ``num_heads``."""
    known = {head_code(layer, head, num_layers, num_heads): (layer, head)
             for layer in range(num_layers) for head in range(num_heads)}
    parts = [part.upper() for part in HEAD_SEPARATORS.split(typed.strip()) if part]
    return tuple(dict.fromkeys(known[part] for part in parts if part in known)), [p for p in parts if p not in known]


def resolve_target(net: Network, inputs: dict[str, torch.Tensor], target: str | int | None) -> Target:
    """``target`` as one token id at ``target_position``; ``None`` means the model's own top prediction."""
    position = target_position(net, inputs["input_ids"])
    tok = net.tokenizer
    if target is None:
        with torch.inference_mode():
            logits = logits_at(net, position, **inputs)[0]
        token_id = int(logits.argmax())
    else:
        token_id = target_token_id(tok, target, net.full.config.vocab_size)
    return Target(position, token_id, decoded_tokens(tok, [token_id])[0])  # part of a character as <0xD8>, not "�"


def mean_pooled(last_hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """``[B, hidden]``: the mean of ``last_hidden`` ``[B, T, hidden]`` over the tokens the mask keeps."""
    mask = attention_mask[..., None].to(last_hidden.dtype)
    return (last_hidden * mask).sum(-2) / mask.sum(-2).clamp(min=1.0)


def _no_cache(module: torch.nn.Module) -> dict:
    """``use_cache=False`` for models that take it (a decoder's key/value cache is not needed here)."""
    return {"use_cache": False} if "use_cache" in inspect.signature(module.forward).parameters else {}


def logits_at(net: Network, position: int, **inputs: torch.Tensor) -> torch.Tensor:
    """``[B, vocab]``: ``net.full``'s logits at ``position`` of ``inputs`` (``input_ids`` or ``inputs_embeds``,
    ``[B, T, …]``). A model whose forward takes ``logits_to_keep`` (transformers' causal language models) applies its
    head there alone: SmolLM2's 49,152-word head over every position was about a fifth of a knock-out pass. A masked
    or encoder-decoder model computes every position's and the one is taken."""
    length = next(value.shape[1] for key, value in inputs.items() if key in ("input_ids", "inputs_embeds"))
    if keeps_logits(net.full):
        return net.full(**inputs, logits_to_keep=length - position, return_dict=True).logits[:, 0]
    return net.full(**inputs, return_dict=True).logits[:, position]


def _measure_outputs(net: Network, inputs: dict[str, torch.Tensor], measure: Measure, target: Target | None) -> torch.Tensor:
    """Per batch row: the pooled last hidden state ``[B, hidden]`` ("embedding") or the
    target's log-probability ``[B]`` ("target")."""
    if measure == "embedding":
        out = net.base(**inputs, **_no_cache(net.base), return_dict=True)
        return mean_pooled(out.last_hidden_state, inputs["attention_mask"])
    assert target is not None
    logits = logits_at(net, target.position, **inputs, **_no_cache(net.full))
    return logits.double().log_softmax(-1)[:, target.token_id]


def check_measure(net: Network, measure: str) -> None:
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
    check_measure(net, measure)
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
                spec = batch_copies(layer, len(chunk)) + _knock_outs([[h] for h in chunk], method)
                with intervened(net.full, spec):  # the layers below ``layer`` run once for all the copies
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
