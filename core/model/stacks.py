"""One data contract for the attention blocks of any model: its *stacks*.

A stack is one kind of attention block, every layer of it: the queries come from one token sequence and the keys from
one (the same, for self-attention). A model with one stack of layers (an encoder such as BERT, a decoder such as
Llama) has one, ``"self"``; an encoder-decoder (T5, BART, Marian …) has three: ``"encoder"`` (source attending to
source), ``"decoder"`` (target attending to earlier target tokens, causal) and ``"cross"`` (target queries, source
keys). All come from the text's one trace (``core.model.trace``: ``Analysis.recorded`` and ``PairAnalysis.recorded``
read its blocks again), so a view asks for "the attention of stack K, layer l, head h" the same way for every model::

    for stack in stacks_of(analysis_or_pair):          # an Analysis or a core.model.seq2seq.PairAnalysis
        stack.label, stack.num_layers, stack.num_heads
        stack.weights(layer, [head])                   # float32 [1, Q, K]: row = query token, column = key token

Shapes (``L`` layers of the stack, ``H`` heads, ``Q`` query tokens, ``K`` key tokens; ``Q = K`` for self-attention):

    queries     Analysis      whose tokens ask (the rows): labels, special tokens, words, hidden states [L + 1, Q, D]
    keys        Analysis      whose tokens are asked (the columns); ``queries`` itself for self-attention
    attentions  [L, H, Q, K]  float32 stored weights, or None when they are computed on demand (a long text)
    records     {l: LayerRecord}  the recorded pass of the stack's layers (queries, keys, values, mask), or None
    causal      bool          a query sees only itself and earlier keys
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from core.model.analysis import Analysis
from core.model.attention_layers import SINGLE_STACK
from core.model.recording import LayerRecord

STACK_LABELS = {
    SINGLE_STACK: "Self-attention",
    "encoder": "Encoder self-attention",
    "decoder": "Decoder self-attention",
    "cross": "Cross-attention",
}
SIDES = {SINGLE_STACK: "", "encoder": "source", "decoder": "target"}  # what a token of a stack's sequence is called


@dataclass(frozen=True, eq=False)
class AttentionStack:
    """Every layer of one kind of attention block (see the module docstring for the fields and shapes)."""

    kind: str
    queries: Analysis
    keys: Analysis
    attentions: np.ndarray | None
    causal: bool
    records: dict[int, LayerRecord] | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        """"Self-attention", "Encoder self-attention", "Decoder self-attention" or "Cross-attention"."""
        return STACK_LABELS[self.kind]

    @property
    def is_cross(self) -> bool:
        """True when queries and keys come from different sequences (cross-attention: the columns are not the rows)."""
        return self.queries is not self.keys

    @property
    def query_side(self) -> str:
        """What a query token is called on screen: "source", "target", or "" for a model with one stack."""
        return SIDES.get(self.kind, "target")

    @property
    def key_side(self) -> str:
        """What a key token is called: "source" for cross-attention, else the query side."""
        return "source" if self.is_cross else self.query_side

    @property
    def num_layers(self) -> int:
        return self.attentions.shape[0] if self.attentions is not None else self.queries.num_layers

    @property
    def num_heads(self) -> int:
        return self.attentions.shape[1] if self.attentions is not None else self.queries.num_heads

    @property
    def num_query_tokens(self) -> int:
        return self.queries.num_tokens

    @property
    def num_key_tokens(self) -> int:
        return self.keys.num_tokens

    def weights(self, layer: int, heads: list[int] | None = None) -> np.ndarray:
        """float32 ``[len(heads), Q, K]`` (all heads when None) of block ``layer``: the stored weights, or for a long
        one-stack text read from its trace (``Analysis.trace``)."""
        if not 0 <= layer < self.num_layers:
            raise ValueError(f"layer must be in 0..{self.num_layers - 1}, got {layer}")
        if self.attentions is not None:
            chosen = self.attentions[layer] if heads is None else self.attentions[layer, list(heads)]
            return np.asarray(chosen, dtype=np.float32)
        if self.queries.trace is None:
            raise ValueError("this analysis was computed without attentions")
        return self.queries.trace.attention(SINGLE_STACK, layer, heads)


class HasStacks(Protocol):
    @property
    def stacks(self) -> tuple[AttentionStack, ...]: ...


def stacks_of(analysis: Analysis | HasStacks) -> tuple[AttentionStack, ...]:
    """The stacks of an ``Analysis`` (one: ``"self"``; a long text's weights read from its trace) or of anything with a
    ``stacks`` property (a ``core.model.seq2seq.PairAnalysis``: ``"encoder"``, ``"decoder"``, ``"cross"``)."""
    if isinstance(analysis, Analysis):
        return (AttentionStack(SINGLE_STACK, analysis, analysis, analysis.attentions, analysis.is_decoder,
                               analysis.recorded),)
    return analysis.stacks


def stack_of(analysis: Analysis | HasStacks, kind: str) -> AttentionStack:
    """The stack ``kind`` ("self", "encoder", "decoder" or "cross") of ``analysis``; ValueError when it has none."""
    for stack in stacks_of(analysis):
        if stack.kind == kind:
            return stack
    kinds = ", ".join(repr(s.kind) for s in stacks_of(analysis))
    raise ValueError(f"no {kind!r} stack here; there are {kinds}")
