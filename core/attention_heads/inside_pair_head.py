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

import torch

from core.attention_heads.inside_head import HeadComputation, compute_stack_head
from core.model.models import LoadedModel
from core.model.parts import parts_of
from core.model.recording import UnsupportedArchitecture
from core.model.seq2seq import PairAnalysis

SUPPORTED = "T5 and the BART family (BART, Marian, mBART, Pegasus)"


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


def compute_pair_head(model: LoadedModel, pair: PairAnalysis, stack: str, layer: int, head: int) -> HeadComputation:
    """Take ``head`` of block ``layer`` of ``stack`` ("encoder", "decoder" or "cross") apart, step by step: the one
    head computation of every model (``core.attention_heads.inside_head.compute_stack_head``), after the
    check that the family is one this page describes (``family``)."""
    family(model)
    return compute_stack_head(model, pair, stack, layer, head)
