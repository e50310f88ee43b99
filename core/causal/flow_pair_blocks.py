"""What each block of an encoder-decoder's two stacks did, read from the pair's one trace (``core.model.trace``), for
``core.causal.flow_pair``: no pass of its own. Each block is called again alone (``Trace.layer``,
``core.model.trace_layers.run_block``: its input and output, each attention's record and output, the stream after
each attention sub-block and the sums its norms read, its MLP's output map's input and output); the weights are the
trace's (``Trace.attention``), equal to eager attention's. Each decoder block's cross-attention adds one term per
(head, source position) of the encoder's output, ``t[i, s, h] = A_h[i, s] · v_h[s] · W_Oʰ`` (``cross_terms``), whose
shares are the proximities of ``core.causal.flow`` (``cross_shares``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from core.model.recording import LayerRecord, UnsupportedArchitecture
from core.model.trace import Trace


class BlockCalls:
    """One block's MLP as its call saw it: the output map (``mlp_map``), that map's input (``neurons`` ``[T, F]``) and
    what it returned (``written`` ``[T, D]``)."""

    def __init__(self, attentions: list[torch.nn.Module] | None = None):
        self.attentions = list(attentions or [])
        self.mlp_map, self.neurons, self.written = None, None, None


def cross_terms(record: LayerRecord, projection: torch.Tensor) -> torch.Tensor:
    """``[T, S, H, D]``: ``t[i, s, h] = A_h[i, s] · v_h[s] · W_Oʰ`` from a cross-attention layer's record (its
    weights kept) and its output projection's ``W [H·d, D]`` (``core.causal.flow.record_output_map``)."""
    heads, d = record.queries.shape[1], record.queries.shape[3]
    values = record.values[0].float()[[h // record.kv_groups for h in range(heads)]]  # [H, S, d]
    with torch.inference_mode():
        written = torch.einsum("hsd,hdD->shD", values, projection.reshape(heads, d, -1))  # [S, H, D]
        return record.weights[0].float().permute(1, 2, 0)[..., None] * written[None]


def cross_shares(terms: torch.Tensor, residual: torch.Tensor, whole: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Proximity shares of ``terms`` ``[T, S, H, D]`` and ``residual`` ``[T, D]`` in ``whole`` ``[T, D]``."""
    t, s, heads, _ = terms.shape
    size = whole.abs().sum(-1)
    near = (size[:, None] - (whole[:, None] - terms.reshape(t, s * heads, -1)).abs().sum(-1)).clamp(min=0)
    near_residual = (size - (whole - residual).abs().sum(-1)).clamp(min=0)
    total = near.sum(1) + near_residual
    has_any = total > 0
    scale = torch.where(has_any, 1 / total.clamp(min=torch.finfo(total.dtype).tiny), 0.0)
    shares = (near * scale[:, None]).reshape(t, s, heads)
    return shares.numpy(), torch.where(has_any, near_residual * scale, 1.0).numpy()


def _tensor(array: np.ndarray | None) -> torch.Tensor | None:
    return None if array is None else torch.tensor(array)  # a copy: the trace's arrays are read-only


class StackBlocks:
    """Every block of one stack of ``trace`` (``"encoder"`` or ``"decoder"``), each called again once: per layer the
    ``core.model.trace_layers.LayerTrace`` and the records of its attentions with the trace's weights."""

    def __init__(self, trace: Trace, stack: str):
        self.trace, self.stack = trace, stack
        self.layers = [trace.layer(stack, layer) for layer in range(trace.num_layers(stack))]

    def record(self, stack: str, layer: int) -> LayerRecord:
        """Block ``layer``'s record of ``stack`` with its weights ``[1, H, T, S]`` (the trace's, a copy)."""
        weights = torch.tensor(np.array(self.trace.attention(stack, layer)))[None]
        return dataclasses.replace(self.layers[layer].records[stack], weights=weights)

    def stacked(self, read) -> torch.Tensor:
        """``[L, ...]``: ``read(layer_trace)`` of every block, as float32 tensors."""
        return torch.stack([_tensor(read(found)) for found in self.layers])

    def post_norm(self) -> bool:
        """True when the blocks normalise after adding each update (BART); refuses a stack that mixes both."""
        found = {found.attention_sum[self.stack] is not None for found in self.layers}
        if len(found) != 1:
            raise UnsupportedArchitecture(f"The {self.stack} mixes blocks that normalise before and after their updates.")
        return found.pop()

    def mlp_calls(self, model: torch.nn.Module) -> list[BlockCalls]:
        """Each block's MLP output map (the trace's, ``core.model.trace_layers.block_layout``), its neurons and output."""
        calls = []
        for layer, found in enumerate(self.layers):
            path, seen = self.trace.blocks[self.stack].mlp_outputs[layer], BlockCalls()
            if path is not None and found.mlp_output is not None:
                seen.mlp_map, seen.written = model.get_submodule(path), _tensor(found.mlp_output)
                seen.neurons = _tensor(found.mlp_input)
            calls.append(seen)
        return calls
