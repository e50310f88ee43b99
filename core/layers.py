"""One numbering for hidden states and blocks, and the words every page uses for it.

``hidden_states`` has ``L + 1`` entries: index 0 is the embedding layer's output (before any
attention), index k the output of block k − 1. Blocks (the app's "layers", as in ``attentions``)
count from 0: block l reads hidden state l and writes hidden state l + 1, so ``attentions[l]``
belongs to the block that produces ``hidden_states[l + 1]``.
"""

from __future__ import annotations

BLOCK_SELECT_LABEL = "Layer (counted from 0)"
BLOCK_SELECT_HELP = "Layer l is the transformer block that reads hidden state l and writes hidden state l + 1."
HIDDEN_STATE_AXIS = "hidden state (0 = embedding layer output; k = output of layer k − 1)"
BLOCK_AXIS = "layer (block, counted from 0; layer l writes hidden state l + 1)"


def hidden_state_label(k: int) -> str:
    """``hidden state k`` with what produced it: the embedding layer (k = 0) or layer (block) k − 1."""
    if k < 0:
        raise ValueError(f"hidden states count from 0, got {k}")
    return "hidden state 0 (embedding layer output)" if k == 0 else f"hidden state {k} (output of layer {k - 1})"


def block_label(layer: int) -> str:
    """``layer l`` with the hidden states it reads and writes."""
    if layer < 0:
        raise ValueError(f"layers count from 0, got {layer}")
    return f"layer {layer} (reads hidden state {layer}, writes hidden state {layer + 1})"


def writer_of(k: int) -> int | None:
    """The layer (block) whose output is hidden state ``k``; None for hidden state 0 (the embedding layer)."""
    if k < 0:
        raise ValueError(f"hidden states count from 0, got {k}")
    return None if k == 0 else k - 1


def numbering_caption(num_layers: int) -> str:
    """One sentence for any page: how layers (blocks) and hidden states are counted for a model of ``num_layers``."""
    if num_layers < 1:
        raise ValueError("a model has at least one layer")
    return (
        f"Layers (blocks) and heads are counted from 0: layer l reads hidden state l and writes hidden state l + 1. "
        f"Hidden state 0 is the embedding layer's output, before any attention; hidden state {num_layers}, the last, "
        f"is the output of layer {num_layers - 1}."
    )
