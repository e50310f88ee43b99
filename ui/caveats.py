"""Short warnings shared by every page that shows the same kind of number."""

from __future__ import annotations

import streamlit as st

from core.model.layers import last_state_note
from core.model.parts import last_state_is_normed

ATTENTION_CAVEAT = (
    "**Attention is not explanation.** A high weight says where a head looked, not that the token mattered for the "
    "output: different weights can give the same output, and weights can disagree with gradient-based importance. "
    "Ablations and gradients test what mattered (Jain & Wallace 2019, *Attention is not Explanation*; Wiegreffe & "
    "Pinter 2019, *Attention is not not Explanation*; Serrano & Smith 2019, *Is Attention Interpretable?*)."
)


def attention_caveat() -> None:
    """The one caveat shown wherever attention weights are shown."""
    st.caption(ATTENTION_CAVEAT)


NORM_WEIGHTED = "norm-weighted"
WORD_LEVEL_HELP = (
    "Merge word pieces into words: sum over a word's key pieces, mean over its query pieces. Not offered for "
    "norm-weighted attention: the sum of the pieces' vector lengths is not the length of the word's summed vector."
)


def word_level_allowed(source: str) -> bool:
    """The one rule for word level on every page: any attention source but norm-weighted (see ``WORD_LEVEL_HELP``)."""
    return source != NORM_WEIGHTED


def final_norm_note(model) -> str:
    """For every view of the last hidden state (or of each layer's move up to it): the sentence saying it is the last
    block's output after the final norm, where the loaded ``model`` (a ``LoadedModel``) is measured to return it so
    (``core.model.parts.last_state_is_normed``: SmolLM2, Gemma 3, GPT-2; not BERT or the MiniLM); else ""."""
    return last_state_note(model.num_layers) if last_state_is_normed(model.model) else ""


def with_final_norm_note(sentence: str, model) -> str:
    """``sentence``, followed by ``final_norm_note(model)`` when there is one."""
    note = final_norm_note(model)
    return f"{sentence} {note}" if note else sentence
