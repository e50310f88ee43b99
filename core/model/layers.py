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
HIDDEN_STATE_SELECT_LABEL = "Hidden state"


def _check_hidden_state(k: int, num_layers: int | None) -> None:
    if k < 0 or (num_layers is not None and k > num_layers):
        raise ValueError(f"hidden states count from 0 to {num_layers if num_layers is not None else 'L'}, got {k}")


def hidden_state_label(k: int, num_layers: int | None = None) -> str:
    """``hidden state k`` with what produced it: the embedding layer (k = 0) or layer (block) k − 1; with
    ``num_layers``, the last one says so and a k past it is a ValueError."""
    _check_hidden_state(k, num_layers)
    if num_layers is not None and k == num_layers:
        return f"the last hidden state ({k}, output of layer {k - 1})"
    return "hidden state 0 (embedding layer output)" if k == 0 else f"hidden state {k} (output of layer {k - 1})"


def block_label(layer: int) -> str:
    """``layer l`` with the hidden states it reads and writes."""
    if layer < 0:
        raise ValueError(f"layers count from 0, got {layer}")
    return f"layer {layer} (reads hidden state {layer}, writes hidden state {layer + 1})"


def head_code(layer: int, head: int, num_layers: int, num_heads: int) -> str:
    """The short name ``L{layer}H{head}`` the knock-out pages read; a ValueError for a head the model lacks."""
    if not (0 <= layer < num_layers and 0 <= head < num_heads):
        raise ValueError(f"layers count 0..{num_layers - 1} and heads 0..{num_heads - 1}, got layer {layer}, head {head}")
    return f"L{layer}H{head}"


def example_head_codes(num_layers: int, num_heads: int) -> str:
    """Two heads of this model written as the pages read them (the first and a later one), e.g. ``L0H2 L3H5``."""
    first = head_code(0, min(2, num_heads - 1), num_layers, num_heads)
    later = head_code(num_layers - 1 if num_layers < 4 else 3, num_heads - 1 if num_heads < 6 else 5, num_layers, num_heads)
    return first if later == first else f"{first} {later}"


def since_hidden_state(k: int, num_layers: int) -> str:
    """``from hidden state k to the last (L)``: a span of hidden states that ends at the model's last one."""
    _check_hidden_state(k, num_layers)
    return f"from hidden state {k} to the last ({num_layers})"


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


def last_state_note(num_layers: int) -> str:
    """Where a model's last hidden state is its last block's output after the final norm
    (``core.model.parts.last_state_is_normed``): what that changes in reading the last row of a figure."""
    return (f"Hidden state {num_layers}, the last, is layer {num_layers - 1}'s output after the model's final norm "
            f"(transformers returns it so): its change from hidden state {num_layers - 1} is partly the norm "
            f"rescaling each dimension by its learned gain, not only what layer {num_layers - 1} wrote.")
