"""One stack's blocks as the information flow (``core.causal.flow``) reads them, one layer at a time.

The flow reads a ``core.model.trace.Trace`` (stack ``"self"``): ``TraceStack`` hands each block's quantities as a
``FlowLayer``, computed by calling that block alone (``Trace.layer``; the trace keeps the residual stream between
blocks), and the attention weights from ``Trace.attention``. An encoder-decoder's flow (``core.causal.flow_pair``) reads
its pair's trace the same way, block by block, and keeps each stack's quantities for every layer at once, in a ``RecordedPass``; both hand the same
``FlowLayer``, so one computation of shares serves both.

Shapes (``L`` layers, ``T`` tokens, ``D`` hidden size, ``F`` the MLP's inner width), float32 torch tensors on the CPU::

    FlowLayer.pre               [T, D]   the block's input: the residual stream before layer l
    FlowLayer.mid               [T, D]   after the attention sub-block has added its update
    FlowLayer.post              [T, D]   the block's output (= pre of layer l + 1)
    FlowLayer.attention_output  [T, D]   what the attention module returned (read where a norm reads it: Gemma 2/3)
    FlowLayer.attention_sum     [T, D]   post-norm blocks only (else None): the input of the norm after attention
    FlowLayer.mlp_sum           [T, D]   post-norm blocks only (else None): the input of the block's last norm
    FlowLayer.mlp_update        [T, D]   what the MLP sub-block added (before a post-norm block's norm)
    FlowLayer.mlp_activations   [T, F]   the input of the MLP's output map (its neurons), or None
    RecordedPass.residual_pre / residual_mid / residual_post / attention_output / attention_sum / mlp_sum  [L, T, D]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch

from core.model.attention_layers import SINGLE_STACK
from core.model.recording import LayerRecord, UnsupportedArchitecture
from core.model.trace import Trace
from core.model.trace_layers import attention_weights


@dataclass(frozen=True, eq=False)
class FlowLayer:
    """One block's quantities (module docstring); ``record`` its attention layer's (queries, keys, values, module)."""

    record: LayerRecord
    pre: torch.Tensor
    mid: torch.Tensor
    post: torch.Tensor
    attention_output: torch.Tensor
    normed: bool  # the block normalises its attention output before adding it (Gemma 2/3)
    mlp_update: torch.Tensor
    attention_sum: torch.Tensor | None = None
    mlp_sum: torch.Tensor | None = None
    mlp_activations: torch.Tensor | None = None

    @property
    def attention_whole(self) -> torch.Tensor:
        """``[T, D]``: the sum the attention node's parts add up to (the stream after attention; in a post-norm block
        the input of the norm after attention)."""
        return self.mid if self.attention_sum is None else self.attention_sum

    @property
    def attention_update(self) -> torch.Tensor:
        """``[T, D]``: what the attention sub-block added (before a post-norm block's norm)."""
        return self.attention_whole - self.pre

    @property
    def mlp_whole(self) -> torch.Tensor:
        """``[T, D]``: the sum the MLP node's parts add up to (the block's output, or the input of its last norm)."""
        return self.post if self.mlp_sum is None else self.mlp_sum

    @property
    def norm_factor(self) -> torch.Tensor | None:
        """``[T, D]``: the frozen scale of a norm on the attention output (update / output, per position), or None."""
        if not self.normed:
            return None
        output, update = self.attention_output, self.mid - self.pre
        safe = torch.where(output != 0, output, torch.ones_like(output))
        return torch.where(output != 0, update / safe, 0.0)


def _tensor(array: np.ndarray | None) -> torch.Tensor | None:
    return None if array is None else torch.from_numpy(array)


class TraceStack:
    """The flow's reading of one stack of a trace (``"self"``): ``block(l)`` a ``FlowLayer``, ``attention(l, heads)``
    the weights ``[heads, T, T]``. Nothing is kept here: the trace keeps its recent blocks and small layers' weights."""

    def __init__(self, trace: Trace, stack: str = SINGLE_STACK, *, keep: bool = False):
        """``keep``: keep every block asked for (``contributions_of`` then ``measures_of`` read each layer once more;
        at the Flow page's 128 tokens of SmolLM2 about 3 MB a layer), else the trace's last few only."""
        self.trace, self.stack = trace, stack
        self._kept: dict[int, FlowLayer] | None = {} if keep else None

    @property
    def num_layers(self) -> int:
        return self.trace.num_layers(self.stack)

    @property
    def num_tokens(self) -> int:
        return len(self.trace.tokens(self.stack))

    @cached_property
    def post_norm(self) -> bool:
        """True when the blocks normalise the residual stream after adding each update (BERT, DistilBERT)."""
        return self.block(0).attention_sum is not None

    def attention(self, layer: int, heads: list[int] | None = None) -> np.ndarray:
        return self.trace.attention(self.stack, layer, heads)

    def residual_pre(self, layer: int) -> torch.Tensor:
        return torch.tensor(self.trace.residual_pre(self.stack, layer))  # a copy: the trace's stream is read-only

    def residual_post(self, layer: int) -> torch.Tensor:
        return torch.tensor(self.trace.residual_post(self.stack, layer))

    def block(self, layer: int) -> FlowLayer:
        """Block ``layer``'s quantities. Raises ``UnsupportedArchitecture`` (a sentence) for a block with no point
        between attention and MLP (GPT-J's parallel blocks)."""
        if self._kept is not None and layer in self._kept:
            return self._kept[layer]
        found = self.trace.layer(self.stack, layer)
        pre, post = self.residual_pre(layer), self.residual_post(layer)
        mid, mlp_sum = _tensor(found.residual_mid[self.stack]), _tensor(found.mlp_sum)
        if mid is None:
            raise UnsupportedArchitecture(
                f"The app cannot find the residual stream between attention and MLP in {self.trace.model_name}'s "
                "blocks (no norm of the block reads it), so this view is not available for this model yet.")
        block = FlowLayer(
            record=found.records[self.stack], pre=pre, mid=mid, post=post,
            attention_output=_tensor(found.attention_output[self.stack]), normed=found.attention_normed[self.stack],
            mlp_update=(post if mlp_sum is None else mlp_sum) - mid,
            attention_sum=_tensor(found.attention_sum[self.stack]), mlp_sum=mlp_sum,
            mlp_activations=_tensor(found.mlp_input))
        if self._kept is not None:
            self._kept[layer] = block
        return block


@dataclass(frozen=True, eq=False)
class RecordedPass:
    """One stack of an encoder-decoder's recorded pass, every layer at once (``core.causal.flow_pair.pair_pass``;
    shapes in the module docstring); ``records[l]`` each layer's ``LayerRecord``."""

    input_ids: tuple[int, ...]
    records: dict[int, LayerRecord]
    residual_pre: torch.Tensor
    residual_mid: torch.Tensor
    residual_post: torch.Tensor
    attention_output: torch.Tensor
    mlp_activations: torch.Tensor | None = None
    attention_sum: torch.Tensor | None = None
    mlp_sum: torch.Tensor | None = None
    _attention_norms: tuple[bool, ...] = field(default=())

    @property
    def num_layers(self) -> int:
        return self.residual_pre.shape[0]

    @property
    def num_tokens(self) -> int:
        return self.residual_pre.shape[1]

    @property
    def post_norm(self) -> bool:
        return self.attention_sum is not None

    @property
    def mlp_update(self) -> torch.Tensor:
        """``[L, T, D]`` what the MLP sub-block added to the residual stream (before a post-norm block's norm)."""
        return (self.residual_post if self.mlp_sum is None else self.mlp_sum) - self.residual_mid

    def attention(self, layer: int, heads: list[int] | None = None) -> np.ndarray:
        """float32 ``[len(heads), T, T]`` (all heads when None), from the recorded queries and keys."""
        return attention_weights(self.records[layer], heads)

    def block(self, layer: int) -> FlowLayer:
        at = lambda x: None if x is None else x[layer]  # noqa: E731 - one layer of each optional stack
        return FlowLayer(
            record=self.records[layer], pre=self.residual_pre[layer], mid=self.residual_mid[layer],
            post=self.residual_post[layer], attention_output=self.attention_output[layer],
            normed=bool(self._attention_norms and self._attention_norms[layer]), mlp_update=self.mlp_update[layer],
            attention_sum=at(self.attention_sum), mlp_sum=at(self.mlp_sum), mlp_activations=at(self.mlp_activations))


def stack_of(source) -> TraceStack | RecordedPass:
    """What the flow reads: a ``Trace``'s one stack, or an encoder-decoder stack's ``RecordedPass`` as it is."""
    return TraceStack(source) if isinstance(source, Trace) else source
