"""Query and key vectors of every head, from the model's own weights (for BertViz's neuron view)."""

from __future__ import annotations

import numpy as np

from core.heads import UnsupportedArchitecture, head_weights, layer_input, verify_layer
from core.inference import Analysis
from core.models import LoadedModel


def queries_and_keys(model: LoadedModel, analysis: Analysis) -> tuple[np.ndarray, np.ndarray]:
    """``(queries, keys)``, each float32 ``[layers, heads, T, d]``: ``x W_Q + b_Q`` and ``x W_K + b_K``.

    ``x`` is what block ``i`` reads (``core.heads.layer_input``). Raises
    ``UnsupportedArchitecture`` (a sentence for the user) when the model's heads cannot be
    taken apart, when their recomputed attention differs from the model's own
    (``core.heads.verify_layer``), or when a head scales q·k by anything other than 1/√d,
    the scale BertViz's neuron view assumes when it recomputes the weights.
    """
    d = model.hidden_size // model.num_heads
    queries, keys = [], []
    for layer in range(model.num_layers):
        verify_layer(model, analysis, layer)
        x = layer_input(model, analysis, layer)
        q_layer, k_layer = [], []
        for head in range(model.num_heads):
            w = head_weights(model, layer, head)
            if not np.isclose(w.scale, d**-0.5):
                raise UnsupportedArchitecture(
                    f"Layer {layer} of {model.name} scales q·k by {w.scale:.4g}, not 1/√{d}; "
                    "BertViz's neuron view assumes 1/√d, so it would show wrong weights."
                )
            q_layer.append(x @ w.w_q + w.b_q)
            k_layer.append(x @ w.w_k + w.b_k)
        queries.append(q_layer)
        keys.append(k_layer)
    return np.asarray(queries, dtype=np.float32), np.asarray(keys, dtype=np.float32)
