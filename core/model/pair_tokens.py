"""How an encoder-decoder reads a (source, target) pair as tokens: the source as the encoder reads it, the target
teacher-forced and **shifted right** (the model's decoder start token first, the target's last token dropped), exactly
as in training. Shared by the trace (``core.model.trace.record``), ``core.model.seq2seq`` and the causal tools."""

from __future__ import annotations

import torch

from core.errors import AnalysisError
from core.model.models import LoadedModel


def decoder_start_token_id(model: LoadedModel) -> int:
    """The token the decoder reads first (T5: <pad>; BART, Marian: </s>), from the model's config."""
    config = model.model.config
    for candidate in (
        getattr(getattr(model.model, "generation_config", None), "decoder_start_token_id", None),
        getattr(config, "decoder_start_token_id", None),
        getattr(config, "bos_token_id", None),
    ):
        if isinstance(candidate, int):
            return candidate
    raise AnalysisError(f"`{model.name}` does not say which token its decoder starts with, so the app cannot run it.")


def shift_right(model: LoadedModel, labels: torch.Tensor) -> torch.Tensor:
    """``[1, T]`` decoder input for target ids ``labels`` ``[1, T]``: the model's own shift (start token,
    then the target without its last token), as in training."""
    prepare = getattr(model.model, "prepare_decoder_input_ids_from_labels", None)
    if prepare is not None:
        return prepare(labels=labels)
    shifted = labels.new_full(labels.shape, decoder_start_token_id(model))
    shifted[:, 1:] = labels[:, :-1]
    return shifted


def encode_text(model: LoadedModel, text: str, limit: int, *, target: bool = False):
    """``(encoding, tokens before the cut)`` of one text (``target``: as a target), cut to ``limit`` tokens."""
    kwargs = {"text_target": text} if target else {"text": text}
    encoding = model.tokenizer(
        **kwargs,
        truncation=True,
        max_length=limit,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
        return_tensors="pt",
    )
    full = len(model.tokenizer(**kwargs, truncation=False)["input_ids"])
    if encoding["input_ids"].shape[1] == 0:
        raise AnalysisError("The tokenizer produced no tokens for this text.")
    return encoding, full


def decoder_tokens(model: LoadedModel, tgt) -> tuple[torch.Tensor, list, list]:
    """What the decoder reads for the target encoding ``tgt``: ``(decoder ids [1, T], offsets, added)``, the target
    shifted right; the start token is an added one, the target's tokens 0..T-2 keep their spans."""
    labels = tgt["input_ids"]
    decoder_ids = shift_right(model, labels)
    label_ids, read = labels[0].tolist(), decoder_ids[0].tolist()
    offsets, added = [(0, 0)], [True]
    target_offsets = [tuple(o) for o in tgt["offset_mapping"][0].tolist()]
    target_added = tgt["special_tokens_mask"][0].bool().tolist()
    for position in range(1, len(read)):
        same = read[position] == label_ids[position - 1]
        offsets.append(target_offsets[position - 1] if same else (0, 0))
        added.append(target_added[position - 1] if same else True)
    return decoder_ids, offsets, added
