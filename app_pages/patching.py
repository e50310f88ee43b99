"""Patching and attribution: where in a language model the answer is decided, and which heads write it."""

import streamlit as st

from core.outputs.predictions import NoLanguageModelHead
from core.teaching.examples import PATCHING_PRESETS
from ui.explain import explain
from ui.lm_views import dla_view, patching_prompts, patching_view
from ui.models import language_model_of
from ui.page_state import end_page, option, set_option
from ui.session import current_model, current_model_name

PRESETS = PATCHING_PRESETS
VIEWS = {"residual": "Residual stream", "heads": "Each head", "mlp": "Each MLP", "dla": "Direct logit attribution"}

st.title("Patching and attribution")
explain(
    "Two prompts of the same length differ in one detail, and the model's answer changes with it. **Activation "
    "patching** runs the *corrupted* prompt but copies one activation from the *clean* run: if that alone brings the "
    "clean answer back, the activation carries the detail. The number shown is logit(answer) − logit(wrong) at the "
    "last position, scaled so that 0 is the corrupted run and 1 the clean run. **Direct logit attribution** splits "
    "the clean run's logit difference into what each head and each MLP writes directly into the last position, "
    "through the final norm with its scale frozen at this run's value."
)
model = current_model()
if not model.is_decoder or model.is_encoder_decoder:
    st.info(f"{model.name} is not a causal language model: patching the next-token prediction needs one (a decoder "
            "such as GPT-2 or SmolLM2). Choose one in the sidebar.", icon=":material/info:")
    end_page()
try:
    with st.spinner(f"Loading the language-model head of {model.name}…"):
        lm = language_model_of(current_model_name())
except NoLanguageModelHead as err:
    st.info(str(err), icon=":material/info:")
    end_page()


def use_preset(name: str) -> None:
    for key, value in zip(("clean", "corrupted", "answer", "wrong"), PRESETS[name]):
        set_option(key, value)


st.caption("Examples:")
buttons = st.columns(len(PRESETS))
for column, name in zip(buttons, PRESETS):
    column.button(name, on_click=use_preset, args=(name,), key=f"preset-{name}")
default = next(iter(PRESETS.values()))
clean, corrupted, answer, wrong = patching_prompts(default)
view = option(st.segmented_control, "Show", list(VIEWS), format_func=VIEWS.get, default="residual", required=True,
              key="view")
if not (clean.strip() and corrupted.strip() and answer and wrong):
    st.info("Fill in both prompts, the answer and the wrong token (or click an example).", icon=":material/edit:")
    end_page()
if view == "dla":
    dla_view(clean, answer, wrong)
else:
    patching_view(view, clean, corrupted, answer, wrong)
