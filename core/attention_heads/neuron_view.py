"""Query and key vectors of every head, from a recorded forward pass of the model (for BertViz's neuron view)."""

from __future__ import annotations

import numpy as np

from core.attention_heads.head_parts import keep_mask, records
from core.attention_heads.inside_head import check_supported, verify_layer
from core.model.analysis import Analysis
from core.model.models import LoadedModel
from core.model.recording import UnsupportedArchitecture


def queries_and_keys(model: LoadedModel, analysis: Analysis) -> tuple[np.ndarray, np.ndarray]:
    """``(queries, keys)``, each float32 ``[layers, heads, T, d]``: ``x W_Q + b_Q`` and ``x W_K + b_K`` as the
    model's attention function received them (``core.attention_heads.head_parts.records``).

    Raises ``UnsupportedArchitecture`` (a sentence for the user) when the model's heads cannot be
    taken apart, when their recomputed attention differs from the model's own
    (``core.attention_heads.inside_head.verify_layer``), or when a head scales q·k by anything other than 1/√d,
    the scale BertViz's neuron view assumes when it recomputes the weights. For a decoder with rotary embeddings
    (Llama …) the queries and keys are after the rotation, keys repeated for the query heads that share them;
    soft-capped or sliding-window layers are refused (the neuron view would not apply the cap or the window).
    """
    check_supported(model)
    t = analysis.num_tokens
    visible = np.tril(np.ones((t, t), dtype=bool)) if analysis.is_decoder else np.ones((t, t), dtype=bool)
    queries, keys = [], []
    for layer, record in sorted(records(model, analysis).items()):
        verify_layer(model, analysis, layer)
        d = record.queries.shape[-1]
        if record.softcap or not np.array_equal(keep_mask(record, t), visible) or not np.isclose(record.scaling, d**-0.5):
            raise UnsupportedArchitecture(
                f"Layer {layer} of {model.name} soft-caps its scores, masks a sliding window or scales q·k by "
                f"{record.scaling:.4g} instead of 1/√{d}; BertViz's neuron view does none of that, so it would show "
                "wrong weights. The attention itself is shown on the other views."
            )
        queries.append(record.queries[0].float().cpu().numpy())
        keys.append(record.keys[0].repeat_interleave(record.kv_groups, dim=0).float().cpu().numpy())
    return np.asarray(queries, dtype=np.float32), np.asarray(keys, dtype=np.float32)
