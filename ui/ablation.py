"""The heads knocked out on the "Does it matter?" page, offered to other pages as an "ablated" toggle.

The effects page remembers its choice with ``remember_knockout`` (a plain session key, so it
survives switching pages). Another page that shows an ``Analysis`` calls ``with_ablation`` once:
when heads were chosen for the sidebar's model, a toggle appears, and when it is on the page gets
the ablated runs instead (same tokens, same shapes), computed once and cached.
"""

from __future__ import annotations

import streamlit as st

from core.model.analysis import Analysis
from ui import results
from ui.session import current_model_name

STATE_KEY = "effects_knockout"
METHOD_NAMES = {"zero": "zero ablation", "mean": "mean ablation (each head's mean over the text's tokens)"}


def head_label(layer: int, head: int) -> str:
    return f"layer {layer}, head {head}"


def remember_knockout(model_name: str, heads: tuple[tuple[int, int], ...], method: str) -> None:
    """Called by the effects page: ``heads`` ((layer, head) pairs, may be empty) ablated by ``method`` for ``model_name``."""
    st.session_state[STATE_KEY] = {"model": model_name, "heads": tuple(heads), "method": method}


def knockout() -> tuple[tuple[tuple[int, int], ...], str] | None:
    """``(heads, method)`` chosen on the effects page for the sidebar's current model, or None."""
    chosen = st.session_state.get(STATE_KEY)
    if not chosen or not chosen["heads"] or chosen["model"] != current_model_name():
        return None
    return chosen["heads"], chosen["method"]


def with_ablation(*analyses: Analysis, key: str = "show_ablated") -> list[Analysis]:
    """``analyses`` unchanged, or (when the user turns on the toggle this draws) their ablated runs.

    Draws nothing when no heads were chosen on the effects page for this model.
    """
    chosen = knockout()
    if chosen is None:
        return list(analyses)
    heads, method = chosen
    names = "; ".join(head_label(*h) for h in heads[:6]) + (f" and {len(heads) - 6} more" if len(heads) > 6 else "")
    if not st.toggle(
        "Ablated run",
        key=key,
        help=f"Show the model's run with {names} knocked out ({METHOD_NAMES.get(method, method)}), "
        "as chosen on the “Does it matter?” page.",
    ):
        return list(analyses)
    st.caption(f"Ablated run: {names} knocked out ({METHOD_NAMES.get(method, method)}).")
    return [results.analyses(current_model_name(), analysis.text, max_tokens=analysis.num_tokens, ablation=(heads, method))
            for analysis in analyses]
