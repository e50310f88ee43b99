"""The logit lens: the model's own language-model head applied to every hidden state.

What would the model predict if it stopped after layer ``l``? GPT-2's head reads the last
hidden state after the final LayerNorm ``ln_f``, so earlier states go through ``ln_f`` first
(``hidden_states[-1]`` already has it, as ``transformers`` returns it). A BERT-style masked LM's
head is a transform (dense, activation, LayerNorm) and the decoder; every state goes through both.
At the last layer the lens equals the model's own output. ``lens_summary`` reads the lens for every position: where
the model's final prediction first comes out on top, and from which hidden state it stays there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from core.model.analysis import Analysis
from core.model.models import LoadedModel
from core.model.recording import UnsupportedArchitecture
from core.model.tokens import decoded_tokens
from core.outputs.predictions import LanguageModel, NoLanguageModelHead, load_language_model

MAX_K = 20
LENS_SUPPORTED = ("GPT-2, decoders with a final norm (Llama, Mistral, Qwen, Gemma, Phi-3 …), and BERT, RoBERTa, "
                  "DistilBERT and ELECTRA masked language models")


class MissingLanguageModelHead(NoLanguageModelHead):
    """The model has no trained language-model head, so there is no lens. The message is a sentence for the user."""


@dataclass(frozen=True, eq=False)
class Lens:
    """Top-``k`` tokens per hidden state and position.

    ``token_ids``: int ``[layers + 1, T, k]`` (row ``l`` = the head applied to ``hidden_states[l]``);
    ``probs``: float32 ``[layers + 1, T, k]``, best first; ``final_ranks``: int ``[layers + 1, T]``,
    the rank (0 = top) at each hidden state of the token the last layer puts first;
    ``tokens``: the ``T`` tokens from ``start`` on and ``candidates``: ``token_ids``, each token decoded on its own
    (``core.model.tokens.decoded_tokens``: `` my``, not ``Ġmy``); ``start``: the position of column 0 (``T`` counts the
    positions from ``start`` to the end of the analysis).
    """

    tokens: list[str]
    token_ids: np.ndarray
    probs: np.ndarray
    final_ranks: np.ndarray
    candidates: list[list[list[str]]]
    kind: str
    start: int = 0

    def __post_init__(self) -> None:
        for array in (self.token_ids, self.probs, self.final_ranks):
            array.setflags(write=False)


def output_head(lm: LanguageModel) -> Callable[[torch.Tensor, bool], torch.Tensor]:
    """``head(hidden [T, hidden], is_last) -> logits [T, vocab]`` for the model's own head (``is_last``: ``hidden`` is
    the last hidden state, already through the final norm). Raises ``UnsupportedArchitecture`` (a sentence)."""
    full = lm.model
    if hasattr(full, "lm_head") and hasattr(getattr(full, "transformer", None), "ln_f"):  # GPT-2
        return lambda h, last: full.lm_head(h if last else full.transformer.ln_f(h))
    if hasattr(full, "cls") and hasattr(full.cls, "predictions"):  # BERT
        return lambda h, last: full.cls(h)
    if hasattr(full, "vocab_projector"):  # DistilBERT
        return lambda h, last: full.vocab_projector(full.vocab_layer_norm(full.activation(full.vocab_transform(h))))
    if hasattr(full, "generator_lm_head"):  # ELECTRA generator
        return lambda h, last: full.generator_lm_head(full.generator_predictions(h))
    if lm.kind == "masked" and hasattr(full, "lm_head"):  # RoBERTa family
        return lambda h, last: full.lm_head(h)
    norm, out = getattr(full.base_model, "norm", None), full.get_output_embeddings()
    if lm.kind == "next" and norm is not None and out is not None:  # Llama, Gemma (its (1 + w) norm is its own) …
        cap = getattr(full.config, "final_logit_softcapping", None)  # Gemma 2: the model caps its logits

        def decoder_head(h: torch.Tensor, last: bool) -> torch.Tensor:
            logits = out(h if last else norm(h))  # hidden_states[-1] already went through the final norm
            return torch.tanh(logits / cap) * cap if cap else logits

        return decoder_head
    raise UnsupportedArchitecture(f"The logit lens is not available for this model; it supports {LENS_SUPPORTED}.")


def language_model_of(model: LoadedModel | LanguageModel) -> LanguageModel:
    """``model`` itself, or its checkpoint loaded with its head; raises ``MissingLanguageModelHead``."""
    if isinstance(model, LanguageModel):
        return model
    try:
        return load_language_model(model)
    except NoLanguageModelHead as err:
        raise MissingLanguageModelHead(str(err)) from None


def logit_lens(model: LoadedModel | LanguageModel, analysis: Analysis, *, k: int = 5, start: int = 0) -> Lens:
    """The logit lens of ``analysis`` (which must come from the same checkpoint as ``model``) at its positions from
    ``start`` on (the head runs only there: over a 49,152-token vocabulary it is most of the cost).

    ``model``: a ``LanguageModel`` (see ``core.outputs.predictions.load_language_model``) or a ``LoadedModel``
    whose checkpoint is then loaded with its head. Raises ``MissingLanguageModelHead`` for models without one.
    """
    lm = language_model_of(model)
    head = output_head(lm)
    k = max(1, min(int(k), MAX_K))
    start = max(0, min(int(start), analysis.num_tokens - 1))
    hidden = torch.from_numpy(np.array(analysis.hidden_states[:, start:], dtype=np.float32)).to(lm.device)
    last = len(hidden) - 1
    ids, probs, ranks = [], [], []
    with torch.inference_mode():
        final = head(hidden[last], True)  # [T, vocab]
        final_top = final.argmax(-1)  # [T]
        for layer in range(len(hidden)):
            # Ranks and the top k come from the logits themselves (the softmax keeps their order); the
            # probabilities of the k alone need the normaliser: a softmax over the whole [T, vocab] is not needed.
            logits = final if layer == last else head(hidden[layer], False)
            best = logits.topk(min(k, logits.shape[-1]), dim=-1)
            log_norm = logits.double().logsumexp(-1, keepdim=True)  # [T, 1]
            ids.append(best.indices.cpu().numpy())
            probs.append((best.values.double() - log_norm).exp().float().cpu().numpy())
            chosen = logits.gather(-1, final_top[:, None])  # [T, 1]
            ranks.append((logits > chosen).sum(-1).cpu().numpy())
    token_ids = np.stack(ids).astype(np.int64)
    candidates = [[decoded_tokens(lm.tokenizer, row) for row in layer] for layer in token_ids.tolist()]
    return Lens(
        tokens=decoded_tokens(lm.tokenizer, analysis.input_ids[start:]),
        token_ids=token_ids,
        probs=np.stack(probs).astype(np.float32),
        final_ranks=np.stack(ranks).astype(np.int64),
        candidates=candidates,
        kind=lm.kind,
        start=start,
    )


# The lens for every position, summarised (computed from ``Lens.final_ranks`` ``[layers + 1, T]``: the rank, 0 = top,
# at each hidden state of the token the last layer puts first): where the final prediction first comes out on top.


@dataclass(frozen=True, eq=False)
class LensSummary:
    """``first_top``: int ``[T]``, the first hidden state at which the final prediction is top-1; ``settled``:
    ``[T]``, the hidden state from which it stays top-1 to the end (at most the last one, where it is by
    definition)."""

    first_top: np.ndarray
    settled: np.ndarray


def lens_summary(final_ranks: np.ndarray) -> LensSummary:
    """``LensSummary`` of ``final_ranks`` ``[layers + 1, T]``."""
    top = np.asarray(final_ranks) == 0
    rows = top.shape[0]
    first = np.argmax(top, axis=0)
    not_top_after = np.where(~top, np.arange(rows)[:, None], -1).max(axis=0)  # last hidden state where it is not top
    return LensSummary(first.astype(np.int64), (not_top_after + 1).astype(np.int64))


def lens_position(analysis: Analysis, kind: str, mask_token_id: int | None) -> int:
    """The position the lens's rank figure opens at: a masked language model's first mask token where the text has
    one, else the last token (a causal model's guess for what comes next)."""
    if kind == "masked" and mask_token_id is not None and mask_token_id in analysis.input_ids:
        return analysis.input_ids.index(mask_token_id)
    return analysis.num_tokens - 1
