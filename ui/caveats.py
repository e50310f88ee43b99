"""Short warnings shared by every page that shows the same kind of number."""

from __future__ import annotations

import streamlit as st

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
