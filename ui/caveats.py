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
