"""Information flow through an encoder-decoder's cross-attention (issue 39, item 4; ``core.flow`` for one stack).

Each decoder block's cross-attention adds to the decoder's residual stream a sum of one term per (head, source
position) of the encoder's last hidden states: ``t[i, s, h] = A_h[i, s] · v_h[s] · W_Oʰ``, where ``v_h`` is the
head's value of the encoder's output and ``W_Oʰ`` its slice of the output projection; Σ over ``s`` and ``h`` is the
cross-attention output less its bias. Each term's share, and the share of the stream it is added to, are the
proximities of ``core.flow`` (``max(0, ‖y‖₁ − ‖y − z‖₁)``, normalised to add up to 1) to the sum ``y`` = stream +
cross-attention output: the input of the first norm the block calls after its cross-attention (BART's
``encoder_attn_layer_norm``, before it normalises; T5's feed-forward ``layer_norm``), found from the calls, not by
family.

Shapes (``L`` decoder layers, ``T`` decoder positions (the target shifted right), ``S`` source tokens, ``H`` heads,
``D`` hidden size)::

    CrossFlow.terms(layer)   [T, S, H, D]   t[i, s, h]
    CrossFlow.attention      [L, T, S, H]   each term's share of the sum after cross-attention
    CrossFlow.residual       [L, T]         the decoder stream's own share there

Not done yet: the decoder's self-attention and MLP nodes of an encoder-decoder and the graph and page that join
these edges to the encoder's last-layer nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.hooks import hooked
from core.inference import _token_limit
from core.models import LoadedModel, threads_for_input
from core.recorded_pass import _first_tensor, _is_norm
from core.recording import LayerRecord, Recorder, UnsupportedArchitecture, attention_modules, record_keys
from core.seq2seq import shift_right


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
        record = self.records[layer]
        heads, d = record.queries.shape[1], record.queries.shape[3]
        values = record.values[0].float()[[h // record.kv_groups for h in range(heads)]]  # [H, S, d]
        w = self.projections[layer][0]
        with torch.inference_mode():
            written = torch.einsum("hsd,hdD->shD", values, w.reshape(heads, d, -1))  # [S, H, D]
            return record.weights[0].float().permute(1, 2, 0)[..., None] * written[None]


def _projection(record: LayerRecord, output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(W [H·d, D], b [D])`` of the linear child of the cross-attention module that maps its heads' outputs side
    by side (Σ_s A · v, per head) to ``output`` ``[T, D]``."""
    weights, values = record.weights[0].float(), record.values[0].float()
    heads = weights.shape[0]
    concat = (weights @ values[[h // record.kv_groups for h in range(heads)]]).transpose(0, 1).reshape(output.shape[0], -1)
    with torch.inference_mode():
        for module in record.module.children():
            if isinstance(module, torch.nn.Linear) and module.in_features == concat.shape[1]:
                if torch.allclose(module(concat), output, rtol=1e-3, atol=1e-4):
                    bias = module.bias.detach().float() if module.bias is not None else torch.zeros(output.shape[1])
                    return module.weight.detach().float().T, bias
    raise UnsupportedArchitecture(f"{type(record.module).__name__} has no output projection the app can find.")


def _shares(terms: torch.Tensor, residual: torch.Tensor, whole: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
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
    ``core.seq2seq.analyze_pair``) and return its cross-attention terms' shares. Raises ``UnsupportedArchitecture``
    (a sentence) for a model whose cross-attention the app cannot take apart."""
    base = model.model
    keys = record_keys(base)
    crosses = [m for m in attention_modules(base) if keys[id(m)][0] == "cross"]
    if not crosses:
        raise UnsupportedArchitecture(f"{model.name} has no cross-attention the app can record.")
    limit = _token_limit(model, max_tokens)
    source_ids = model.tokenizer(source, truncation=True, max_length=limit)["input_ids"]
    labels = model.tokenizer(text_target=target, truncation=True, max_length=limit)["input_ids"]
    decoder_ids = shift_right(model, torch.tensor([labels]))
    outputs: list[torch.Tensor | None] = [None] * len(crosses)
    sums: list[torch.Tensor | None] = [None] * len(crosses)

    def cross_post(module, _args, output):
        outputs[crosses.index(module)] = _first_tensor(output).detach()[0]

    def norm_pre(_module, args, kwargs):
        # the first norm called after a cross-attention whose input is not that attention's own output
        seen = _first_tensor(kwargs.get("hidden_states", args[0] if args else None)).detach()[0]
        for layer, out in enumerate(outputs):
            if out is not None and sums[layer] is None and not (seen.shape == out.shape and torch.equal(seen, out)):
                sums[layer] = seen

    inside = {id(m) for cross in crosses for m in cross.modules()}
    hooks = [(cross, "post", cross_post) for cross in crosses]  # registered through core.hooks
    hooks += [(m, "pre", norm_pre) for m in base.get_decoder().modules() if id(m) not in inside and _is_norm(m)]
    ids = torch.tensor([source_ids])
    with torch.inference_mode(), threads_for_input(0), hooked(hooks), Recorder(base) as rec:
        base(input_ids=ids, attention_mask=torch.ones_like(ids), decoder_input_ids=decoder_ids)
    records = rec.stacks.get("cross", {})
    if len(records) != len(crosses) or any(s is None for s in sums):
        raise UnsupportedArchitecture(f"The app cannot find the stream each cross-attention of {model.name} adds to.")
    projections = tuple(_projection(records[layer], outputs[layer].float()) for layer in range(len(crosses)))
    flow = CrossFlow(tuple(source_ids), tuple(decoder_ids[0].tolist()), records, projections,
                     torch.stack([o.float() for o in outputs]), torch.stack([s.float() for s in sums]),
                     np.zeros(0), np.zeros(0))
    found = [_shares(flow.terms(layer), flow.sums[layer] - flow.outputs[layer], flow.sums[layer])
             for layer in range(len(crosses))]
    object.__setattr__(flow, "attention", np.stack([a for a, _ in found]))
    object.__setattr__(flow, "residual", np.stack([r for _, r in found]))
    return flow
