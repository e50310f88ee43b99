"""One text's forward pass as the pages read it, an ``Analysis`` (``core.model.analysis``, shapes there).

``analyze(model, text)`` records the text's trace (``core.model.trace.record``: one pass at the model's own speed) and
reads it (``analysis_of``): the hidden states are the trace's residual stream with the model's ``last_hidden_state``
last (as transformers returns ``hidden_states``), the weights are the trace's (``Trace.attention``), stored as
``attentions`` up to ``STORED_ATTENTION_MAX_TOKENS`` tokens and computed from ``Analysis.trace`` above.
``iter_analyses`` / ``analyze_many`` run batches of several short texts in one padded pass each (eager
``output_attentions``; no trace, no sliding windows); a long text among them is analysed alone through its trace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch

from core.errors import AnalysisError
from core.model.analysis import Analysis, special_token_ids
from core.model.attention_layers import SINGLE_STACK
from core.model.models import LoadedModel, threads_for_input
from core.model.recording import is_recordable
from core.model.text_limits import check_text, token_limit
from core.model.trace import Trace, record
from core.model.words import text_word_ids

# Above this many tokens an Analysis keeps no head's [T, T] weights (SmolLM2-135M: 283 MB at 512 tokens, 18 GB at 4,096)
STORED_ATTENTION_MAX_TOKENS = 512


def analysis_of(trace: Trace, model: LoadedModel, *, on_demand: bool | None = None, stack: str = SINGLE_STACK) -> Analysis:
    """The ``Analysis`` of one stack of ``trace`` of ``model``: a one-stack trace's ``"self"`` (``Analysis.trace`` is
    ``trace``), or an encoder-decoder's ``"encoder"`` (the source) or ``"decoder"`` (the target; no ``Analysis.trace``:
    ``core.model.seq2seq.PairAnalysis.trace`` holds it). ``attentions``: every layer's weights from
    ``trace.attentions`` (the trace keeps them, no copy) up to ``STORED_ATTENTION_MAX_TOKENS`` tokens, else None
    (``on_demand`` True: None at any length; False: stored at any length). The last hidden state is the pass's
    ``last_hidden_state`` (an encoder-decoder's encoder: ``encoder_last_hidden_state``; after a final norm), as
    transformers' ``output_hidden_states`` gives it unless the config sets ``tie_last_hidden_states`` False; the
    residual stream is copied only when it differs."""
    if stack not in trace.stacks or stack == "cross":
        raise ValueError(f"an Analysis reads one self-attention stack; this trace has {', '.join(trace.stack_names)}")
    sequence, residual = trace.tokens(stack), trace.residual[stack]
    hidden = residual
    last = trace.outputs.get("encoder_last_hidden_state" if stack == "encoder" else "last_hidden_state")
    tie = getattr(model.model.config, "tie_last_hidden_states", None) is not False
    if tie and last is not None and last.shape == residual.shape[1:] and not np.array_equal(last, residual[-1]):
        hidden = np.array(residual)
        hidden[-1] = last
    t, layers = len(sequence), trace.num_layers(stack)
    attentions = None
    if on_demand is False or (on_demand is None and t <= STORED_ATTENTION_MAX_TOKENS):
        attentions = trace.attentions(stack)
        if attentions is None:  # longer than the trace keeps: every layer computed, stored here
            attentions = np.stack([trace.attention(stack, layer) for layer in range(layers)])
    windows = tuple(trace.layer_info(stack, layer).sliding_window for layer in range(layers))
    one = stack == SINGLE_STACK
    pooler = trace.outputs.get("pooler_output") if one and model.has_pooler else None  # a random pooler means nothing
    return Analysis(
        text=sequence.text,
        model_name=trace.model_name,
        tokens=list(sequence.tokens),
        input_ids=list(sequence.ids),
        attentions=attentions,
        hidden_states=hidden,
        special_mask=sequence.special_mask,
        word_ids=list(sequence.word_ids),
        offsets=list(sequence.offsets),
        truncated=sequence.truncated,
        num_input_tokens=sequence.num_input_tokens,
        is_decoder=model.is_decoder if one else stack == "decoder",
        pooler_output=pooler,
        sliding_windows=windows if any(w is not None for w in windows) else None,
        trace=trace if one else None,
    )


def _encode(model: LoadedModel, texts: Sequence[str], limit: int):
    return model.tokenizer(
        list(texts),
        truncation=True,
        max_length=limit,
        padding=True,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
        return_tensors="pt",
    )


def _forward(model: LoadedModel, encoding, attentions: bool):
    """The model's outputs for a padded batch (hidden states, and every head's weights with ``attentions``)."""
    inputs = {"input_ids": encoding["input_ids"], "attention_mask": encoding["attention_mask"]}
    if "token_type_ids" in encoding and "token_type_ids" in model.tokenizer.model_input_names:
        inputs["token_type_ids"] = encoding["token_type_ids"]
    inputs = {k: v.to(model.device) for k, v in inputs.items()}
    with torch.inference_mode(), threads_for_input(inputs["input_ids"].numel()):
        return model.model(**inputs, output_attentions=attentions, output_hidden_states=True, return_dict=True)


def _refuse_encoder_decoder(model: LoadedModel) -> None:
    if getattr(model, "is_encoder_decoder", False):
        raise AnalysisError(
            f"`{model.name}` is an encoder-decoder model: it reads a source text and writes a target, so analyse it "
            "with `core.model.seq2seq.analyze_pair(model, source, target)` (encoder, decoder and cross-attention), not `analyze`."
        )


def _real_positions(attention_mask: np.ndarray) -> slice | np.ndarray:
    """The positions of real tokens in one padded row: a slice (no copies) when there is no padding,
    else their indices (padding side does not matter)."""
    if attention_mask.all():
        return slice(None)
    return np.flatnonzero(attention_mask)


def _own(array: np.ndarray, alone: bool) -> np.ndarray:
    """``array`` itself when it is the batch's only row, else a copy: a view would keep the whole batch alive."""
    return array if alone and array.flags.c_contiguous else np.array(array, copy=True)


def _keep_square(attentions: np.ndarray, real: slice | np.ndarray, alone: bool) -> np.ndarray:
    """``[layers, heads, T, T]`` of the real positions: no copy for a lone unpadded text, one copy otherwise."""
    if isinstance(real, slice):
        return _own(attentions, alone)
    return attentions[:, :, real[:, None], real]


def iter_analyses(
    model: LoadedModel,
    texts: Sequence[str],
    *,
    max_tokens: int | None = None,
    batch_size: int = 16,
    attentions: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[tuple[int, Analysis]]:
    """Analyse many texts in batches; yields ``(index into texts, Analysis)``.

    Texts are sorted by length and each batch is padded only to its own longest
    text (never to the model maximum); padding is removed from every result, so
    each Analysis equals ``analyze`` on that text alone (without its trace and sliding windows). ``progress(done,
    total)`` is called after each batch. Empty texts raise ``AnalysisError``. A text longer than
    ``STORED_ATTENTION_MAX_TOKENS`` tokens (with ``attentions``) is analysed alone by ``analyze`` (its trace keeps
    the weights' ingredients, not the weights).
    """
    _refuse_encoder_decoder(model)
    for i, text in enumerate(texts):
        try:
            check_text(text)
        except AnalysisError as err:
            raise AnalysisError(f"Text {i + 1} is empty: every document needs some text.") from err
    limit = token_limit(model, max_tokens)
    tok = model.tokenizer
    lengths = [len(ids) for ids in tok(list(texts), add_special_tokens=True, truncation=False)["input_ids"]]
    order = sorted(range(len(texts)), key=lambda i: -lengths[i])
    long = {i for i in order if attentions and min(lengths[i], limit) > STORED_ATTENTION_MAX_TOKENS}
    rest = [i for i in order if i not in long]
    batches = [[i] for i in order if i in long] + [rest[start : start + max(1, batch_size)]
                                     for start in range(0, len(rest), max(1, batch_size))]
    special_ids = special_token_ids(tok)
    special_array = np.fromiter(special_ids, dtype=np.int64, count=len(special_ids))
    done = 0
    for batch in batches:
        if batch[0] in long:
            yield batch[0], analyze(model, texts[batch[0]], max_tokens=max_tokens)
        else:
            yield from _batch_analyses(model, texts, batch, lengths, limit, attentions, special_array)
        done += len(batch)
        if progress is not None:
            progress(done, len(texts))


def _batch_analyses(model: LoadedModel, texts: Sequence[str], batch: list[int], lengths: list[int], limit: int,
                    attentions: bool, special_array: np.ndarray) -> Iterator[tuple[int, Analysis]]:
    """One padded pass over the texts ``batch`` (indices into ``texts``), padding removed from each result."""
    tok = model.tokenizer
    encoding = _encode(model, [texts[i] for i in batch], limit)
    if encoding["input_ids"].shape[1] == 0:
        raise AnalysisError("The tokenizer produced no tokens for this text.")
    out = _forward(model, encoding, attentions)
    att = torch.stack(out.attentions, dim=1).float().cpu().numpy() if attentions else None  # [B, L, H, Tmax, Tmax]
    pooler = getattr(out, "pooler_output", None) if model.has_pooler else None  # a random pooler means nothing
    pooler = pooler.float().cpu().numpy() if pooler is not None else None
    hidden = torch.stack(out.hidden_states, dim=1).float().cpu().numpy()  # [B, L+1, Tmax, D]
    out = None
    for row, index in enumerate(batch):
        real = _real_positions(encoding["attention_mask"][row].numpy())  # load_model pads on the right
        ids = (ids_array := encoding["input_ids"][row].numpy()[real]).tolist()
        special = encoding["special_tokens_mask"][row].numpy()[real].astype(bool) | np.isin(ids_array, special_array)
        offsets = list(map(tuple, encoding["offset_mapping"][row].numpy()[real].tolist()))
        yield index, Analysis(
            text=texts[index],
            model_name=model.name,
            tokens=tok.convert_ids_to_tokens(ids),
            input_ids=ids,
            attentions=_keep_square(att[row], real, len(batch) == 1) if att is not None else None,
            hidden_states=_own(hidden[row][:, real], len(batch) == 1),
            special_mask=special,
            word_ids=text_word_ids(texts[index], offsets, special.tolist()),
            offsets=offsets,
            truncated=len(ids) < lengths[index],
            num_input_tokens=lengths[index],
            is_decoder=model.is_decoder,
            pooler_output=pooler[row] if pooler is not None else None,
        )


def analyze_many(
    model: LoadedModel,
    texts: Sequence[str],
    *,
    max_tokens: int | None = None,
    batch_size: int = 16,
    attentions: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> list[Analysis]:
    """``iter_analyses`` collected back into the order of ``texts``."""
    results: list[Analysis | None] = [None] * len(texts)
    for index, analysis in iter_analyses(
        model, texts, max_tokens=max_tokens, batch_size=batch_size, attentions=attentions, progress=progress
    ):
        results[index] = analysis
    return results  # type: ignore[return-value]


def analyze(model: LoadedModel, text: str, *, max_tokens: int | None = None, on_demand: bool | None = None) -> Analysis:
    """Record ``text``'s trace (``core.model.trace.record``) and read it as an ``Analysis`` (``analysis_of``).

    Text longer than ``max_tokens`` (default and ceiling: the model's limit, its whole window) is
    truncated and the result says so (``truncated``, ``num_input_tokens``). Above ``STORED_ATTENTION_MAX_TOKENS``
    tokens (or with ``on_demand=True``) the weights are not stored but computed when asked for from the trace
    (``Analysis.trace``, ``core.attention_heads.attention.head_attention``); ``on_demand=False`` stores them at any
    length. A model whose attention the app does not record is run once with ``output_attentions`` (no trace; up to
    ``STORED_ATTENTION_MAX_TOKENS`` tokens).
    Raises ``AnalysisError`` for empty text, and for an encoder-decoder model (use ``core.model.seq2seq.analyze_pair``).
    """
    _refuse_encoder_decoder(model)
    check_text(text)
    if is_recordable(model.model):
        return analysis_of(record(model, text, max_tokens=max_tokens), model, on_demand=on_demand)
    limit, length = token_limit(model, max_tokens), len(model.tokenizer(text, truncation=False)["input_ids"])
    if on_demand or min(length, limit) > STORED_ATTENTION_MAX_TOKENS:
        raise AnalysisError(
            f"{model.name}'s attention is not recorded by the app, so it cannot analyse texts longer than "
            f"{STORED_ATTENTION_MAX_TOKENS} tokens with it. Shorten the text to {STORED_ATTENTION_MAX_TOKENS} tokens."
        )
    special = np.fromiter(special_token_ids(model.tokenizer), dtype=np.int64)
    return next(_batch_analyses(model, [text], [0], [length], limit, True, special))[1]
