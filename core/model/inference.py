"""One forward pass, kept as a typed ``Analysis`` that every page reads.

Shapes, written once here (``T`` = number of tokens, special tokens included):

- ``attentions``: float32 ``[layers, heads, T, T]``; row = query, column = key.
  ``attentions[i]`` is the attention of block ``i``, the block that turns
  ``hidden_states[i]`` into ``hidden_states[i + 1]``. Stored only up to
  ``STORED_ATTENTION_MAX_TOKENS`` tokens; above, ``attentions`` is None and
  ``on_demand`` (``core.model.on_demand.OnDemandAttention``) computes any layer or
  head from each block's kept call (``core.attention_heads.attention.head_attention``).
- ``hidden_states``: float32 ``[layers + 1, T, hidden]``. Index 0 is the
  embedding layer's output: for BERT, word + position + token-type embeddings
  after LayerNorm (not the raw word-embedding lookup); for GPT-2, word +
  position embeddings. For GPT-2 the last entry has the final LayerNorm
  (``ln_f``) applied, as ``transformers`` returns it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np
import torch

from core.errors import AnalysisError
from core.model.attention_layers import attention_modules
from core.model.hooks import hooked, keeping_call
from core.model.models import LoadedModel, threads_for_input
from core.model.on_demand import OnDemandAttention, release_freed_memory
from core.model.parts import blocks_of
from core.model.recording import LayerRecord, Recorder, is_recordable
from core.model.text_limits import check_text, token_limit
from core.model.words import text_word_ids

# Above this many tokens an Analysis keeps no head's [T, T] weights (SmolLM2-135M: 283 MB at 512 tokens, 18 GB at 4,096)
STORED_ATTENTION_MAX_TOKENS = 512
# A long text's pass runs each layer's attention this many query rows at a time: 38 MB of scores, not 2.4 GB (8,192)
QUERY_ROWS_PER_CHUNK = 128
# During and after a long pass, hand freed memory back to the OS (``release_freed_memory``) before each block, after
# its attention and after each hidden state copied out: SmolLM2 at 4,096 tokens peaks 0.25 GB lower
RELEASE_AFTER_LONG_PASS = True


@dataclass(frozen=True, eq=False)
class Analysis:
    """Everything one forward pass over one text produced (see the module docstring for shapes).

    ``tokens``: the tokenizer's tokens, special tokens included (``T`` of them).
    ``attentions``: ``[layers, heads, T, T]``, or ``None`` when computed without attentions.
    ``hidden_states``: ``[layers + 1, T, hidden]``.
    ``special_mask``: bool ``[T]``, True for tokens the tokenizer treats as special
    ([CLS], [SEP], <|endoftext|>, padding …), never decided by position.
    ``word_ids``: for each token, its word's index (None for special tokens), read from the text (``core.model.words``).
    ``offsets``: for each token, its ``(start, end)`` character span in ``text`` ((0, 0) for added special tokens).
    ``truncated``: True when the text had more than ``max_tokens`` tokens and was cut.
    ``pooler_output``: ``[hidden]`` for models whose checkpoint has pooler weights
    (``LoadedModel.has_pooler``: a dense + tanh layer on the last [CLS] state, trained or not,
    see ``LoadedModel.pooler_trained``; it is not the [CLS] hidden state), else None.
    ``sliding_windows``: per layer, the sliding window its attention call masked with (a query at ``i`` sees keys
    ``j`` with ``i - w < j <= i``; Mistral, Gemma 2/3, Qwen 2 with windows) or None for a full layer; None when no layer
    has one or the pass was not recorded (a batch of several texts).
    ``on_demand``: for a text of more than ``STORED_ATTENTION_MAX_TOKENS`` tokens (or ``analyze(..., on_demand=True)``)
    ``attentions`` is None and this holds the arguments each block was called with (its input is
    ``hidden_states[l]``, not copied; the masks as bool), from which ``core.attention_heads.attention.head_attention`` computes
    exactly the model's weights of one head: the block is called again up to its attention for that layer's queries
    and keys (its ``weights(model, hidden_states, layer, heads, rows)`` any layer, heads or query rows). SmolLM2-135M
    at 4,096 tokens: 293 MB of hidden states, 17 MB of mask, 2 MB of rotary tables. None otherwise.
    ``recorded``: ``{layer: core.model.recording.LayerRecord}`` of this very pass (queries, keys, values, mask; no weights)
    when it was recorded (one text of a recordable model), else None: ``core.attention_heads.inside_head`` takes a head apart from it
    without running the model again, and it is kept, like the arrays, wherever the Analysis is kept.
    Arrays are read-only: an Analysis is shared between sessions through the cache.
    """

    text: str
    model_name: str
    tokens: list[str]
    input_ids: list[int]
    attentions: np.ndarray | None
    hidden_states: np.ndarray
    special_mask: np.ndarray
    word_ids: list[int | None]
    offsets: list[tuple[int, int]]
    truncated: bool
    num_input_tokens: int
    is_decoder: bool
    pooler_output: np.ndarray | None = None
    sliding_windows: tuple[int | None, ...] | None = None
    on_demand: OnDemandAttention | None = None
    recorded: dict[int, LayerRecord] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        t = len(self.tokens)
        if self.hidden_states.ndim != 3 or self.hidden_states.shape[1] != t:
            raise ValueError(f"hidden_states must be [layers + 1, {t}, hidden], got {self.hidden_states.shape}")
        if self.attentions is not None:
            layers = self.hidden_states.shape[0] - 1
            if self.attentions.ndim != 4 or self.attentions.shape[0] != layers or self.attentions.shape[2:] != (t, t):
                raise ValueError(f"attentions must be [{layers}, heads, {t}, {t}], got {self.attentions.shape}")
        for label, seq in (("input_ids", self.input_ids), ("word_ids", self.word_ids), ("offsets", self.offsets)):
            if len(seq) != t:
                raise ValueError(f"{label} has {len(seq)} entries for {t} tokens")
        if self.special_mask.shape != (t,) or self.special_mask.dtype != np.bool_:
            raise ValueError(f"special_mask must be bool [{t}], got {self.special_mask.dtype} {self.special_mask.shape}")
        for array in (self.attentions, self.hidden_states, self.special_mask, self.pooler_output):
            if array is not None:
                array.setflags(write=False)

    @property
    def num_tokens(self) -> int:
        return len(self.tokens)

    @property
    def num_layers(self) -> int:
        return self.hidden_states.shape[0] - 1

    @property
    def num_heads(self) -> int:
        if self.attentions is not None:
            return self.attentions.shape[1]
        if self.on_demand is not None:
            return self.on_demand.num_heads
        raise ValueError("this Analysis was computed without attentions")

    @property
    def has_attention(self) -> bool:
        """True when every head's weights can be read: stored (``attentions``) or computed on demand."""
        return self.attentions is not None or self.on_demand is not None

    @property
    def hidden_size(self) -> int:
        return self.hidden_states.shape[2]


def special_token_ids(tokenizer) -> set[int]:
    """Ids the app treats as special: [CLS], [SEP], <|endoftext|>, padding and the like.

    [UNK] and [MASK] stand for content the user typed, so they stay ordinary tokens.
    """
    structural = {
        tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id
    }
    # GPT-2's unk is <|endoftext|>, also its bos/eos: structural wins.
    keep_as_content = {tokenizer.unk_token_id, tokenizer.mask_token_id} - structural
    return {i for i in tokenizer.all_special_ids if i not in keep_as_content} - {None}


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


def _forward(model: LoadedModel, encoding, attentions: bool, on_demand: bool = False):
    """The model's outputs, the sliding windows of its recorded layers (or None), and for ``on_demand`` (one text of a
    recorded model) the ``OnDemandAttention`` that stands for its weights, which are then not returned."""
    inputs = {"input_ids": encoding["input_ids"], "attention_mask": encoding["attention_mask"]}
    if "token_type_ids" in encoding and "token_type_ids" in model.tokenizer.model_input_names:
        inputs["token_type_ids"] = encoding["token_type_ids"]
    inputs = {k: v.to(model.device) for k, v in inputs.items()}
    # one text of a recorded model (core.model.recording): keep its queries, keys and values for core.attention_heads.inside_head
    record = attentions and inputs["input_ids"].shape[0] == 1 and is_recordable(model.model)
    if on_demand and not record:
        raise AnalysisError(
            f"{model.name}'s attention is not recorded by the app, so it cannot analyse texts longer than "
            f"{STORED_ATTENTION_MAX_TOKENS} tokens with it. Shorten the text to {STORED_ATTENTION_MAX_TOKENS} tokens."
        )
    # a long pass keeps no layer's queries or keys (shapes only) but the arguments of every block's call, from which
    # core.model.on_demand computes a layer's queries and keys again when a view asks
    recorder = Recorder(model.model, keep_weights=False, queries_keys_only=on_demand, shapes_only=on_demand,
                        rows_per_chunk=QUERY_ROWS_PER_CHUNK if on_demand else None) if record else nullcontext()
    blocks = blocks_of(model.model) if on_demand else []
    calls: list[tuple[tuple, dict] | None] = [None] * len(blocks)
    keeping = [keeping_call(block, functools.partial(_keep_call, calls, layer)) for layer, block in enumerate(blocks)]
    if on_demand and record and RELEASE_AFTER_LONG_PASS:  # the attention's freed transients, before the MLP's
        keeping += [(module, "post", _release) for module in attention_modules(model.model)]
    extra = {"use_cache": False} if on_demand and model.is_decoder else {}  # no second copy of every key and value
    with torch.inference_mode(), threads_for_input(inputs["input_ids"].numel()), hooked(keeping), recorder as rec:
        out = model.model(**inputs, output_attentions=attentions and not on_demand, output_hidden_states=True,
                          return_dict=True, **extra)
    windows, stand_in, records = None, None, None
    if record and len(rec.records) == model.num_layers:
        if on_demand:  # a long pass's records are not kept for core.attention_heads.inside_head: four of them would hold gigabytes
            if len(blocks) != model.num_layers or any(call is None for call in calls):
                raise AnalysisError(f"{model.name}'s blocks were not all seen in this pass, so this long text cannot "
                                    f"be analysed. Shorten it to {STORED_ATTENTION_MAX_TOKENS} tokens.")
            paths = {id(module): name for name, module in model.model.named_modules()}
            stand_in = OnDemandAttention.from_pass(rec.records, calls, [paths[id(b)] for b in blocks], out.hidden_states)
        else:  # core.attention_heads.inside_head takes this pass's heads apart without running the model again
            records = rec.records
        recorded = tuple(None if r.sliding_window is None else int(r.sliding_window) for _, r in sorted(rec.records.items()))
        windows = recorded if any(w is not None for w in recorded) else None
    elif on_demand:
        raise AnalysisError(f"{model.name}'s attention was not recorded in every layer, so this long text cannot be "
                            f"analysed. Shorten it to {STORED_ATTENTION_MAX_TOKENS} tokens.")
    return out, windows, stand_in, records


def _release(*_) -> None:
    release_freed_memory()


def _keep_call(calls: list, layer: int, args: tuple, kwargs: dict) -> None:
    calls[layer] = (args, kwargs)
    if RELEASE_AFTER_LONG_PASS:  # the previous block's freed transients, which glibc would keep resident
        release_freed_memory()


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
    on_demand: bool | None = None,
) -> Iterator[tuple[int, Analysis]]:
    """Analyse many texts in batches; yields ``(index into texts, Analysis)``.

    Texts are sorted by length and each batch is padded only to its own longest
    text (never to the model maximum); padding is removed from every result, so
    each Analysis equals ``analyze`` on that text alone. ``progress(done, total)``
    is called after each batch. Empty texts raise ``AnalysisError``.
    ``on_demand``: keep each block's call instead of every head's weights (``Analysis.on_demand``); None (default)
    decides by length, above ``STORED_ATTENTION_MAX_TOKENS`` tokens. Such texts run one at a time.
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

    def long(i: int) -> bool:
        return attentions and (on_demand if on_demand is not None else min(lengths[i], limit) > STORED_ATTENTION_MAX_TOKENS)

    alone = [[i] for i in order if long(i)]
    rest = [i for i in order if not long(i)]
    batches = alone + [rest[start : start + max(1, batch_size)] for start in range(0, len(rest), max(1, batch_size))]
    special_ids = special_token_ids(tok)
    done = 0
    for batch in batches:
        encoding = _encode(model, [texts[i] for i in batch], limit)
        if encoding["input_ids"].shape[1] == 0:
            raise AnalysisError("The tokenizer produced no tokens for this text.")
        out, windows, stand_in, records = _forward(model, encoding, attentions, on_demand=long(batch[0]))
        att = (torch.stack(out.attentions, dim=1).float().cpu().numpy()  # [B, L, H, Tmax, Tmax]
               if attentions and stand_in is None else None)
        pooler = getattr(out, "pooler_output", None) if model.has_pooler else None  # a random pooler means nothing
        pooler = pooler.float().cpu().numpy() if pooler is not None else None
        if stand_in is None:
            hidden = torch.stack(out.hidden_states, dim=1).float().cpu().numpy()  # [B, L+1, Tmax, D]
        else:  # a long text: copy layer by layer, each freed once copied, so they are never held twice
            states = list(out.hidden_states)
            del out
            hidden = np.empty((1, len(states), *states[0].shape[1:]), dtype=np.float32)
            for i in range(len(states)):
                hidden[0, i] = states[i][0].float().cpu().numpy()
                states[i] = None
                if RELEASE_AFTER_LONG_PASS:  # glibc would keep the freed state resident: the states held twice
                    release_freed_memory()
        out = None
        if stand_in is not None and RELEASE_AFTER_LONG_PASS:
            release_freed_memory()
        special_array = np.fromiter(special_ids, dtype=np.int64, count=len(special_ids))
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
                sliding_windows=windows,
                on_demand=stand_in,
                recorded=records if len(batch) == 1 else None,
            )
        done += len(batch)
        if progress is not None:
            progress(done, len(texts))


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
    """Run ``model`` on ``text`` and keep its attentions and hidden states.

    Text longer than ``max_tokens`` (default and ceiling: the model's limit, its whole window) is
    truncated and the result says so (``truncated``, ``num_input_tokens``). Above ``STORED_ATTENTION_MAX_TOKENS``
    tokens (or with ``on_demand=True``) the weights are not stored but computed when asked for (``Analysis.on_demand``,
    ``core.attention_heads.attention.head_attention``).
    Raises ``AnalysisError`` for empty text, and for an encoder-decoder model (use ``core.model.seq2seq.analyze_pair``).
    """
    _refuse_encoder_decoder(model)
    check_text(text)
    return next(iter_analyses(model, [text], max_tokens=max_tokens, batch_size=1, on_demand=on_demand))[1]
