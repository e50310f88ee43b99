"""One text as the pages read it: the typed ``Analysis`` (``core.model.inference.analyze`` makes it from the text's trace).

Shapes, written once here (``T`` = number of tokens, special tokens included):

- ``attentions``: float32 ``[layers, heads, T, T]``; row = query, column = key.
  ``attentions[i]`` is the attention of block ``i``, the block that turns
  ``hidden_states[i]`` into ``hidden_states[i + 1]``. Stored only up to
  ``core.model.inference.STORED_ATTENTION_MAX_TOKENS`` tokens; above, ``attentions`` is None and ``trace``
  (``core.model.trace.Trace``) computes any layer, head or query rows (``core.attention_heads.attention.head_attention``).
- ``hidden_states``: float32 ``[layers + 1, T, hidden]``. Index 0 is the
  embedding layer's output: for BERT, word + position + token-type embeddings
  after LayerNorm (not the raw word-embedding lookup); for GPT-2, word +
  position embeddings. The last entry is the model's ``last_hidden_state``, as ``transformers`` returns it in
  ``hidden_states[-1]``: after the final norm of a decoder (GPT-2's ``ln_f``, Llama's ``norm``).

Kept apart from ``core.model.inference`` so that the trace (``core.model.trace``, which ``analyze`` reads) and the
encoder-decoder pass (``core.model.seq2seq``) can build on it without an import circle.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from core.model.attention_layers import SINGLE_STACK
from core.model.recording import LayerRecord


@dataclass(frozen=True, eq=False)
class Analysis:
    """Everything one forward pass over one text produced (see the module docstring for shapes).

    ``tokens``: the tokenizer's tokens, special tokens included (``T`` of them).
    ``attentions``: ``[layers, heads, T, T]``, or ``None`` when computed without attentions or above
    ``STORED_ATTENTION_MAX_TOKENS`` tokens (then ``trace`` computes them).
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
    ``trace``: the ``core.model.trace.Trace`` this Analysis was read from (``analyze``: one recorded pass per text), or
    None (a batch of several texts, a knocked-out run, an encoder-decoder's side). Any head's weights
    (``trace.attention("self", layer, heads, rows)``) and any layer's queries, keys and values come from it without
    running the model again; it holds the loaded model weakly.
    ``recorded`` (a property): ``{layer: core.model.recording.LayerRecord}`` of this very pass (queries, keys, values,
    mask, the attention's input and rotary tables; no weights), each layer computed from ``trace`` when first read,
    or None without a trace: ``core.attention_heads.inside_head`` takes a head apart from it.
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
    trace: object | None = None  # core.model.trace.Trace (not imported: the trace builds on this module)

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
        if self.trace is not None:
            return self.trace.layer_info(SINGLE_STACK, 0).heads
        raise ValueError("this Analysis was computed without attentions")

    @property
    def has_attention(self) -> bool:
        """True when every head's weights can be read: stored (``attentions``) or computed from the trace."""
        return self.attentions is not None or self.trace is not None

    @property
    def hidden_size(self) -> int:
        return self.hidden_states.shape[2]

    @property
    def recorded(self) -> Mapping[int, LayerRecord] | None:
        return None if self.trace is None else TraceRecords(self.trace)

    @property
    def nbytes(self) -> int:
        """Bytes of this Analysis's own arrays (its trace is counted where the trace is kept)."""
        arrays = (self.attentions, self.hidden_states, self.special_mask, self.pooler_output)
        return sum(a.nbytes for a in arrays if a is not None)


class TraceRecords(Mapping):
    """``{layer: LayerRecord}`` of one stack of a trace (``"self"``, or an encoder-decoder's ``"encoder"``, ``"decoder"``,
    ``"cross"``), each layer's block called again when it is read (``core.model.trace.Trace.layer``; the trace keeps
    the last few)."""

    def __init__(self, trace, stack: str = SINGLE_STACK) -> None:
        self.trace, self.stack = trace, stack

    def __getitem__(self, layer: int) -> LayerRecord:
        if not isinstance(layer, int) or not 0 <= layer < len(self):
            raise KeyError(layer)
        return self.trace.layer(self.stack, layer).records[self.stack]

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self)))

    def __len__(self) -> int:
        return self.trace.num_layers(self.stack)


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
