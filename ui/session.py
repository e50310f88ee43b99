"""The shared sidebar (model and text, bound to the URL) and the accessors pages use."""

from __future__ import annotations

import streamlit as st

from core.examples import BANK_RIVER, EXAMPLE_SENTENCES, SUGGESTED_MODELS
from core.inference import Analysis
from core.models import DEFAULT_MODEL, LoadedModel
from ui.cache import cached_analysis, cached_model

MAX_TEXT_CHARS = 20_000


def _use_example() -> None:
    choice = st.session_state.get("example")
    if choice in EXAMPLE_SENTENCES:
        st.session_state["text"] = EXAMPLE_SENTENCES[choice]
    st.session_state["example"] = None


def render_sidebar() -> None:
    """Model picker, text box, examples and display options; all bound to query params."""
    chosen = st.session_state.get("model") or st.query_params.get("model")
    options = SUGGESTED_MODELS + ([chosen] if chosen and chosen not in SUGGESTED_MODELS else [])
    with st.sidebar:
        st.selectbox(
            "Model",
            options,
            key="model",
            bind="query-params",
            accept_new_options=True,
            help="The bundled all-MiniLM-L6-v2 works offline. Type any Hugging Face id "
            "(needs network) or the path of a local model folder.",
        )
        st.text_area(
            "Text to analyse",
            value=BANK_RIVER,
            key="text",
            bind="query-params",
            max_chars=MAX_TEXT_CHARS,
            height=120,
        )
        st.pills("Examples", list(EXAMPLE_SENTENCES), key="example", on_change=_use_example)
        with st.expander("Display"):
            st.toggle(
                "Presentation mode",
                key="present",
                bind="query-params",
                help="Large fonts on a white background, for screenshots and slides.",
            )
            st.radio(
                "Figure download format",
                ["PNG", "SVG"],
                key="img",
                bind="query-params",
                horizontal=True,
                help="What the camera button in each figure's toolbar saves (PNG at 3× resolution).",
            )


def current_model_name() -> str:
    return (st.session_state.get("model") or DEFAULT_MODEL).strip() or DEFAULT_MODEL


def current_text() -> str:
    return st.session_state.get("text") or ""


def current_model() -> LoadedModel:
    """The sidebar's model, loaded once per process. Raises ``ModelLoadError`` with a user message."""
    name = current_model_name()
    with st.spinner(f"Loading {name}…"):
        return cached_model(name)


def current_analysis(max_tokens: int | None = None) -> Analysis:
    """The sidebar's text through the sidebar's model (cached). Raises ``AnalysisError`` for empty text."""
    model = current_model()
    with st.spinner("Running the model…"):
        analysis = cached_analysis(current_model_name(), current_text(), max_tokens)
    if analysis.truncated:
        st.info(
            f"The text has {analysis.num_input_tokens} tokens; {model.name} reads at most "
            f"{analysis.num_tokens}, so only the first {analysis.num_tokens} are shown.",
            icon=":material/content_cut:",
        )
    return analysis


def presentation_mode() -> bool:
    return bool(st.session_state.get("present"))


def image_format() -> str:
    return "svg" if st.session_state.get("img") == "SVG" else "png"
