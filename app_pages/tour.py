"""Guided tour: a few steps, each with one live figure for the model on screen, on one of two tracks: from tokens to a
corpus (ui/tour_attention.py), and for a causal language model how it predicts (ui/tour_language_model.py)."""

import streamlit as st

from ui.page_state import option, option_value, set_option
from ui.seq2seq import stop_unless_one_stack
from ui.session import presentation_mode
from ui.tour_attention import ATTENTION_STEPS
from ui.tour_kit import ATTENTION, LM, PRESENTATION_CSS, choose_track
from ui.tour_language_model import LM_STEPS

present = presentation_mode()
stop_unless_one_stack("The tour follows one text through one stack (the static embedding, its layers, its senses), so it "
                      "does not apply; pick an encoder such as the bundled model for the tour.")


def _move(delta: int, count: int) -> None:
    set_option("step", min(count, max(1, int(option_value("step", 1)) + delta)))


if present:
    st.html(PRESENTATION_CSS)
else:
    st.title("Guided tour")
steps, intro = choose_track({ATTENTION: ATTENTION_STEPS, LM: LM_STEPS})
if not present:
    st.caption(intro)
back, where, forward = st.columns([1, 6, 1], vertical_alignment="center")
number = option(where.slider, "Step", 1, len(steps), 1, key="step", label_visibility="collapsed")
# drawn after the slider (in columns left and right of it) so each knows whether it leads anywhere
back.button("Back", key="tour_back", icon=":material/arrow_back:", shortcut="Left", on_click=_move,
            args=(-1, len(steps)), disabled=number <= 1)
forward.button("Next", key="tour_next", icon=":material/arrow_forward:", shortcut="Right", on_click=_move,
               args=(1, len(steps)), disabled=number >= len(steps))
title, render = steps[number - 1]
st.progress(number / len(steps), text=f"Step {number} of {len(steps)}")
st.header(f"{number} · {title}")
render()
