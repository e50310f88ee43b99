"""One attention head of an encoder-decoder taken apart from the pair's trace (T5 and the BART family).

For encoder self-attention, decoder self-attention and cross-attention: the pair's trace (``PairAnalysis.trace``,
``core.model.trace``: stacks "encoder", "decoder", "cross") calls the head's block again on its kept call and records
its queries, keys and values as projected, the mask (or sdpa's skipped causal one), the scaling and T5's
relative-position bias, so nothing is recomputed from the weights and the model is not run again. The head reads:

- encoder self-attention, block ``l``: ``source.hidden_states[l]`` (after the block's LayerNorm in
  pre-LN models: T5, mBART, Pegasus);
- decoder self-attention, block ``l``: ``target.hidden_states[l]`` (same rule);
- cross-attention, block ``l``: queries from the decoder after its self-attention sub-layer (residual
  added, LayerNorm as the model places it), keys and values from the encoder's output
  ``source.hidden_states[-1]``.

BART-family scores are ``q·k / √d``; T5's are ``q·k`` plus a learned relative-position bias (self-attention
only), with no scaling. Decoder self-attention is causal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.attention_heads.head_parts import as_float64, keep_mask, softmax
from core.errors import AnalysisError
from core.model.models import LoadedModel
from core.model.parts import parts_of
from core.model.recording import LayerRecord, UnsupportedArchitecture
from core.model.seq2seq import PairAnalysis

SUPPORTED = "T5 and the BART family (BART, Marian, mBART, Pegasus)"


@dataclass(frozen=True)
class PairHeadComputation:
    """Every step of one head (float64). ``queries [T, d]``, ``keys``/``values [S, d]`` (S = T for self-attention);
    ``scores = q·k [T, S]``; ``bias``: T5's position bias ``[T, S]`` (zeros elsewhere); ``scaled`` = scores ×
    ``scale`` + bias, −∞ where masked; ``weights`` = softmax(scaled); ``outputs`` = weights @ values;
    ``keep_mask``: bool ``[T, S]``."""

    queries: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    scores: np.ndarray
    bias: np.ndarray
    scaled: np.ndarray
    weights: np.ndarray
    outputs: np.ndarray
    keep_mask: np.ndarray
    scale: float


def family(model: LoadedModel) -> str:
    """"t5" (its attention learns a relative-position bias: a table inside the attention module) or "bart", for the
    page's wording; raises ``UnsupportedArchitecture`` for a model without recorded encoder, decoder and
    cross-attention stacks (``core.model.parts``)."""
    try:
        stacks = parts_of(model.model).stacks
    except UnsupportedArchitecture:
        stacks = {}
    if not {"encoder", "decoder", "cross"} <= set(stacks):
        raise UnsupportedArchitecture(
            f"Recomputing a head step by step is not available for {model.model_type} models. It supports {SUPPORTED}."
        )
    attention = stacks["encoder"][0].attention
    return "t5" if any(isinstance(m, torch.nn.Embedding) for m in attention.modules()) else "bart"


def pair_record(pair: PairAnalysis, stack: str, layer: int) -> LayerRecord:
    """Block ``layer``'s record of ``stack`` in ``pair``'s trace (the block called again alone: no pass). Raises
    ``AnalysisError`` for a pair without a trace (a model the app does not record)."""
    if pair.recorded is None:
        raise AnalysisError("This pair was read without a trace, so its heads cannot be taken apart: read it again.")
    return pair.recorded[stack][layer]


def compute_pair_head(model: LoadedModel, pair: PairAnalysis, stack: str, layer: int, head: int) -> PairHeadComputation:
    """Take ``head`` of block ``layer`` of ``stack`` ("encoder", "decoder" or "cross") apart, step by step."""
    family(model)
    analysis = pair.source if stack == "encoder" else pair.target
    heads = analysis.num_heads
    if not 0 <= layer < (pair.source.num_layers if stack == "encoder" else pair.num_decoder_layers):
        raise ValueError(f"layer {layer} does not exist in the {stack}")
    if not 0 <= head < heads:
        raise ValueError(f"head must be in 0..{heads - 1}, got {head}")
    record = pair_record(pair, stack, layer)
    kv = head // record.kv_groups
    q, k, v = as_float64(record.queries[0, head]), as_float64(record.keys[0, kv]), as_float64(record.values[0, kv])
    scores = q @ k.T
    t, s = scores.shape
    keep = keep_mask(record, t, s)
    bias = np.zeros((t, s)) if record.position_bias is None else as_float64(record.position_bias[0, head, :t, :s])
    scaled = np.where(keep, scores * record.scaling + bias, -np.inf)
    weights = softmax(scaled)
    return PairHeadComputation(q, k, v, scores, bias, scaled, weights, weights @ v, keep, record.scaling)
