"""What the model itself predicts: masked-word fill-ins (encoders) or the next token (decoders).

This needs the model's language-model head, the layer that turns the last hidden state into a
probability for every word of the vocabulary. Many checkpoints (the bundled all-MiniLM-L6-v2
among them) ship only the encoder; loading them with a head would give the head random
weights, and its "predictions" would be noise. ``load_language_model`` refuses such models.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

from core.model.models import BUNDLED_LM, WEIGHT_LOAD_LOCK, LoadedModel, ModelLoadError, cached_on_disk, first_line
from core.model.tokens import decoded_tokens

# Public checkpoints that include their language-model head (they need network to download once).
MODELS_WITH_HEAD = ("distilbert-base-cased", "bert-base-uncased", "gpt2")
MAX_TOP_K = 20


class NoLanguageModelHead(ModelLoadError):
    """The checkpoint has no trained language-model head. The message is a sentence for the user."""


@dataclass(frozen=True)
class LanguageModel:
    """A model with its trained language-model head; ``kind`` says what it predicts."""

    name: str
    tokenizer: Any
    model: torch.nn.Module
    kind: Literal["masked", "next"]
    max_tokens: int
    device: str


@dataclass(frozen=True, eq=False)
class Predictions:
    """The top-k predictions at ``P`` positions of one text.

    ``kind``: "masked" (what the mask token at each position stands for) or "next" (the token
    that follows each position). ``tokens``: the text's tokens, each decoded on its own (GPT-2's
    ``Ġbank`` is " bank"); ``positions``: ``[P]`` token
    positions predicted at; ``candidate_ids``: int ``[P, k]``; ``candidates``: their text
    (``P`` lists of ``k``); ``probabilities``: ``[P, k]``, best first (the softmax over the whole
    vocabulary, so each row sums to at most 1). For "next": ``actual_ids`` ``[P]`` is the token
    that really came next (-1 after the last token) and ``actual_probabilities`` ``[P]`` its
    probability (NaN after the last token), and ``last_logits`` float32 ``[V]`` the logits after the last token (the
    next-token distribution's, from the same pass).
    """

    kind: Literal["masked", "next"]
    tokens: list[str]
    positions: np.ndarray
    candidate_ids: np.ndarray
    candidates: list[list[str]]
    probabilities: np.ndarray
    actual_ids: np.ndarray | None = None
    actual_probabilities: np.ndarray | None = None
    last_logits: np.ndarray | None = None

    def __post_init__(self) -> None:
        for array in (self.positions, self.candidate_ids, self.probabilities, self.actual_ids, self.actual_probabilities,
                      self.last_logits):
            if array is not None:
                array.setflags(write=False)

    def top(self, k: int) -> Predictions:
        """The same predictions cut to the best ``k`` candidates (no new forward pass)."""
        return Predictions(
            self.kind,
            self.tokens,
            self.positions.copy(),
            self.candidate_ids[:, :k].copy(),
            [row[:k] for row in self.candidates],
            self.probabilities[:, :k].copy(),
            None if self.actual_ids is None else self.actual_ids.copy(),
            None if self.actual_probabilities is None else self.actual_probabilities.copy(),
            self.last_logits,
        )


def keeps_logits(module: torch.nn.Module) -> bool:
    """Whether ``module``'s forward takes ``logits_to_keep`` (transformers' causal language models): its head can then
    run on the positions read alone (a 49,152-word head over every position of a long prompt costs more than a layer)."""
    return "logits_to_keep" in inspect.signature(module.forward).parameters


def last_position_only(module: torch.nn.Module) -> dict[str, int]:
    """``{"logits_to_keep": 1}`` when ``module`` ``keeps_logits``: the last position is the only one a caller of this
    reads. Empty for a model without it."""
    return {"logits_to_keep": 1} if keeps_logits(module) else {}


def base_model_of(lm: LanguageModel) -> LoadedModel:
    """``lm``'s base transformer (its modules without the language-model head) as a ``LoadedModel``: what reads one
    (a trace, ``core.model.trace.record``) reads the same modules, nothing loaded or copied."""
    config = lm.model.config
    return LoadedModel(name=lm.name, source=lm.name, tokenizer=lm.tokenizer, model=lm.model.base_model,
                       num_layers=int(config.num_hidden_layers), num_heads=int(config.num_attention_heads),
                       hidden_size=int(config.hidden_size), is_decoder=lm.kind == "next", max_tokens=lm.max_tokens,
                       model_type=config.model_type, device=lm.device)


def _no_head(model: LoadedModel, detail: str) -> NoLanguageModelHead:
    return NoLanguageModelHead(
        f"`{model.name}` has no language-model head: {detail} Without it the model cannot say which "
        f"words it would predict, and a randomly initialised head would only show noise. The bundled "
        f"`{BUNDLED_LM}` has its head and works offline: pick it in the sidebar. Other models that include "
        f"their head: {', '.join(f'`{m}`' for m in MODELS_WITH_HEAD)} (type one in the sidebar's model box; "
        "each needs network to download once)."
    )


def load_language_model(model: LoadedModel) -> LanguageModel:
    """Load ``model``'s checkpoint with its language-model head, the same safe way as ``load_model``.

    Encoders get ``AutoModelForMaskedLM``, decoders ``AutoModelForCausalLM``. Raises
    ``NoLanguageModelHead`` when any head weight is missing from the checkpoint (it would be
    randomly initialised) or the tokenizer has no mask token, ``ModelLoadError`` when loading fails.
    """
    kind: Literal["masked", "next"] = "next" if model.is_decoder else "masked"
    if kind == "masked" and model.tokenizer.mask_token_id is None:
        raise _no_head(model, "its tokenizer has no mask token, so there is nothing to fill in.")
    auto = AutoModelForCausalLM if kind == "next" else AutoModelForMaskedLM
    shared = _head_on_loaded_model(model) if kind == "next" else None
    if shared is not None:
        return LanguageModel(model.name, model.tokenizer, shared, kind, model.max_tokens, model.device)
    try:
        with WEIGHT_LOAD_LOCK:  # see core.model.models.WEIGHT_LOAD_LOCK
            lm, info = auto.from_pretrained(
                model.source,
                local_files_only=Path(model.source).is_dir() or cached_on_disk(model.source),
                trust_remote_code=False,
                attn_implementation=model.model.config._attn_implementation,  # as the loaded model (core.model.recording)
                dtype=torch.float32,
                output_loading_info=True,
            )
    except ValueError as err:  # no masked-LM / causal-LM class for this architecture
        raise _no_head(model, f"transformers has no {'causal' if kind == 'next' else 'masked'} language-model "
                       f"class for {model.model_type} models.") from err
    except (OSError, KeyError, TypeError, RuntimeError) as err:
        raise ModelLoadError(
            f"The language-model version of `{model.name}` could not be loaded ({first_line(str(err))})."
        ) from err
    missing = sorted(info.get("missing_keys") or [])
    if missing:
        del lm
        shown = ", ".join(f"`{key}`" for key in missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise _no_head(model, f"its checkpoint holds only the base model (missing: {shown}).")
    lm = lm.to(device=model.device, dtype=torch.float32).eval()
    return LanguageModel(model.name, model.tokenizer, lm, kind, model.max_tokens, model.device)


def _head_on_loaded_model(model: LoadedModel) -> torch.nn.Module | None:
    """The causal-LM class of ``model`` built around its already loaded base model, when the head is the input
    embeddings (tied, as in SmolLM2 and GPT-2): no weights are loaded twice. None when that does not apply."""
    base = model.model
    config = base.config
    if not getattr(config, "tie_word_embeddings", False) or base.get_input_embeddings() is None:
        return None
    try:
        with WEIGHT_LOAD_LOCK, torch.device("meta"):  # the shell only: every part is replaced by the loaded model's
            lm = AutoModelForCausalLM.from_config(config, trust_remote_code=False)
    except (ValueError, KeyError, TypeError):  # no causal-LM class for this architecture
        return None
    prefix = lm.base_model_prefix
    head = lm.get_output_embeddings()
    if type(getattr(lm, prefix, None)) is not type(base) or head is None or getattr(head, "bias", None) is not None:
        return None
    setattr(lm, prefix, base)
    head.weight = base.get_input_embeddings().weight
    if any(t.is_meta for t in [*lm.parameters(), *lm.buffers()]):
        return None
    return lm.eval()


def _candidate_text(tokenizer, ids: list[int]) -> list[str]:
    """Each token id decoded on its own, spaces kept, part of a character as its bytes (``core.model.tokens``)."""
    return decoded_tokens(tokenizer, ids)


def predict(lm: LanguageModel, text: str, top_k: int = 10, *, max_tokens: int | None = None) -> Predictions:
    """Top-``top_k`` predictions for ``text``: at every mask token ("masked"; none if the text has no
    mask token) or after every token ("next"). Text longer than the model's limit (or ``max_tokens``, when
    smaller: SmolLM2 reads 8,192 tokens, far past what the app analyses) is truncated."""
    tok = lm.tokenizer
    limit = lm.max_tokens if max_tokens is None else max(1, min(int(max_tokens), lm.max_tokens))
    encoding = tok(text, truncation=True, max_length=limit, return_tensors="pt")
    ids = encoding["input_ids"].to(lm.device)
    inputs = {"input_ids": ids, "attention_mask": encoding["attention_mask"].to(lm.device)}
    if "token_type_ids" in encoding and "token_type_ids" in tok.model_input_names:
        inputs["token_type_ids"] = encoding["token_type_ids"].to(lm.device)
    with torch.inference_mode():
        logits = lm.model(**inputs).logits[0]  # [T, vocab]
        probabilities = logits.double().softmax(dim=-1)
    ids = ids[0]
    if lm.kind == "masked":
        positions = torch.nonzero(ids == tok.mask_token_id).flatten()
    else:
        positions = torch.arange(len(ids), device=ids.device)
    k = min(top_k, probabilities.shape[-1])
    best = probabilities[positions].topk(k, dim=-1)
    result = {
        "kind": lm.kind,
        "tokens": _candidate_text(tok, ids.tolist()),
        "positions": positions.cpu().numpy(),
        "candidate_ids": best.indices.cpu().numpy(),
        "candidates": [_candidate_text(tok, row) for row in best.indices.tolist()],
        "probabilities": best.values.cpu().numpy(),
    }
    if lm.kind == "next":
        following = torch.cat([ids[1:], ids.new_tensor([-1])])  # [T]: the token that came next
        actual = torch.full((len(ids),), float("nan"), dtype=torch.float64, device=ids.device)
        actual[:-1] = probabilities[:-1].gather(1, following[:-1, None])[:, 0]
        result |= {"actual_ids": following.cpu().numpy(), "actual_probabilities": actual.cpu().numpy(),
                   "last_logits": logits[-1].float().cpu().numpy()}
    return Predictions(**result)
