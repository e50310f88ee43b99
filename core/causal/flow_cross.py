"""Information flow through an encoder-decoder's cross-attention (issue 39, item 4; ``core.causal.flow`` for one stack).

Each decoder block's cross-attention adds to the decoder's residual stream a sum of one term per (head, source
position) of the encoder's last hidden states: ``t[i, s, h] = A_h[i, s] · v_h[s] · W_Oʰ``, where ``v_h`` is the
head's value of the encoder's output and ``W_Oʰ`` its slice of the output projection; Σ over ``s`` and ``h`` is the
cross-attention output less its bias. Each term's share, and the share of the stream it is added to, are the
proximities of ``core.causal.flow`` (``max(0, ‖y‖₁ − ‖y − z‖₁)``, normalised to add up to 1) to the sum ``y`` = stream +
cross-attention output: the input of the first norm the block calls after its cross-attention (BART's
``encoder_attn_layer_norm``, before it normalises; T5's feed-forward ``layer_norm``), found from the calls, not by
family.

Shapes (``L`` decoder layers, ``T`` decoder positions (the target shifted right), ``S`` source tokens, ``H`` heads,
``D`` hidden size)::

    CrossFlow.terms(layer)   [T, S, H, D]   t[i, s, h]
    CrossFlow.attention      [L, T, S, H]   each term's share of the sum after cross-attention
    CrossFlow.residual       [L, T]         the decoder stream's own share there

Each cross-attention layer's output projection is ``core.model.parts``' (the one lookup of a model's parts). The decoder's
self-attention and MLP nodes, and the graph that joins these edges to the encoder's last-layer nodes, are
``core.causal.flow_pair``'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.causal.flow import record_output_map
from core.model.attention_layers import attention_modules, record_keys
from core.model.hooks import first_tensor, hooked
from core.model.models import LoadedModel, threads_for_input
from core.model.pair_tokens import shift_right
from core.model.parts import is_norm
from core.model.recording import LayerRecord, Recorder, UnsupportedArchitecture
from core.model.text_limits import token_limit


@dataclass(frozen=True, eq=False)
class CrossFlow:
    """One pass's cross-attention records and shares (see the module docstring for shapes)."""

    source_ids: tuple[int, ...]
    decoder_ids: tuple[int, ...]
    records: dict[int, LayerRecord]
    projections: tuple[tuple[torch.Tensor, torch.Tensor], ...]  # per layer (W [H·d, D], b [D])
    outputs: torch.Tensor  # [L, T, D] what each cross-attention module returned
    sums: torch.Tensor  # [L, T, D] stream + cross-attention output
    attention: np.ndarray
    residual: np.ndarray

    def terms(self, layer: int) -> torch.Tensor:
        """``[T, S, H, D]``: each (head, source position) term of block ``layer``'s cross-attention update."""
        return cross_terms(self.records[layer], self.projections[layer][0])


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


def cross_flow(model: LoadedModel, source: str, target: str, *, max_tokens: int | None = None) -> CrossFlow:
    """Run an encoder-decoder once over ``source`` and ``target`` (teacher-forced, shifted right as in
    ``core.model.seq2seq.analyze_pair``) and return its cross-attention terms' shares. Raises ``UnsupportedArchitecture``
    (a sentence) for a model whose cross-attention the app cannot take apart."""
    base = model.model
    keys = record_keys(base)
    crosses = [m for m in attention_modules(base) if keys[id(m)][0] == "cross"]
    if not crosses:
        raise UnsupportedArchitecture(f"{model.name} has no cross-attention the app can record.")
    limit = token_limit(model, max_tokens)
    source_ids = model.tokenizer(source, truncation=True, max_length=limit)["input_ids"]
    labels = model.tokenizer(text_target=target, truncation=True, max_length=limit)["input_ids"]
    decoder_ids = shift_right(model, torch.tensor([labels]))
    outputs: list[torch.Tensor | None] = [None] * len(crosses)
    sums: list[torch.Tensor | None] = [None] * len(crosses)

    def cross_post(module, _args, output):
        outputs[crosses.index(module)] = first_tensor(output).detach()[0]

    def norm_pre(_module, args, kwargs):
        # the first norm called after a cross-attention whose input is not that attention's own output
        seen = first_tensor(kwargs.get("hidden_states", args[0] if args else None)).detach()[0]
        for layer, out in enumerate(outputs):
            if out is not None and sums[layer] is None and not (seen.shape == out.shape and torch.equal(seen, out)):
                sums[layer] = seen

    inside = {id(m) for cross in crosses for m in cross.modules()}
    hooks = [(cross, "post", cross_post) for cross in crosses]  # registered through core.model.hooks
    hooks += [(m, "pre", norm_pre) for m in base.get_decoder().modules() if id(m) not in inside and is_norm(m)]
    ids = torch.tensor([source_ids])
    with torch.inference_mode(), threads_for_input(0), hooked(hooks), Recorder(base) as rec:
        base(input_ids=ids, attention_mask=torch.ones_like(ids), decoder_input_ids=decoder_ids)
    records = rec.stacks.get("cross", {})
    if len(records) != len(crosses) or any(s is None for s in sums):
        raise UnsupportedArchitecture(f"The app cannot find the stream each cross-attention of {model.name} adds to.")
    projections = tuple(record_output_map(records[layer]) for layer in range(len(crosses)))  # core.model.parts
    flow = CrossFlow(tuple(source_ids), tuple(decoder_ids[0].tolist()), records, projections,
                     torch.stack([o.float() for o in outputs]), torch.stack([s.float() for s in sums]),
                     np.zeros(0), np.zeros(0))
    found = [cross_shares(flow.terms(layer), flow.sums[layer] - flow.outputs[layer], flow.sums[layer])
             for layer in range(len(crosses))]
    object.__setattr__(flow, "attention", np.stack([a for a, _ in found]))
    object.__setattr__(flow, "residual", np.stack([r for _, r in found]))
    return flow
