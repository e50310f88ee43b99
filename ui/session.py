"""The shared sidebar (model and text, bound to the URL) and the accessors pages use."""

from __future__ import annotations

import streamlit as st

from core.examples import BANK_RIVER, EXAMPLE_SENTENCES, SUGGESTED_MODELS
from core.inference import Analysis
from core.models import BUNDLED_KINDS, BUNDLED_MODELS, DEFAULT_MODEL, LoadedModel, ModelLoadError, bundled_name
from core.settings import Settings, load_settings
from ui.cache import cached_analysis, cached_model
from ui.page_state import option, option_value, set_option

MAX_TEXT_CHARS = 100_000  # far past any model limit; the tokenizer truncates with a notice


def current_settings() -> Settings:
    """Laptop or workshop-server settings, from the environment or ``.streamlit/secrets.toml``."""
    try:
        secrets = {key: st.secrets[key] for key in st.secrets}
    except Exception:  # noqa: BLE001 - no secrets file is the normal laptop case
        secrets = {}
    return load_settings(secrets)


def model_label(name: str) -> str:
    """What the picker shows for ``name``: a bundled model with what it is, any other name as it is."""
    bundled = bundled_name(name) if isinstance(name, str) and name.strip() else None
    return f"{name} — {BUNDLED_KINDS[bundled]} (bundled)" if bundled else str(name)


def _offered_models(settings: Settings) -> list[str]:
    """Both bundled models first, then the server's allowed models or the laptop's suggestions."""
    others = [m for m in settings.allowed_models if m != "*"] if settings.server_mode else list(SUGGESTED_MODELS)
    return list(BUNDLED_MODELS) + [m for m in others if bundled_name(m) is None]


def _use_example() -> None:
    choice = st.session_state.get("example")
    if choice in EXAMPLE_SENTENCES:
        set_option("text", EXAMPLE_SENTENCES[choice], app=True)
    st.session_state["example"] = None


def render_sidebar() -> None:
    """Model picker, text box, examples and display options; app-wide options in the URL (``ui.page_state``)."""
    settings = current_settings()
    chosen = option_value("model", app=True) or st.query_params.get("model")
    options = _offered_models(settings)
    if settings.server_mode:
        help_text = "This workshop server offers only these models."
    else:
        help_text = (
            "The two bundled models work offline: all-MiniLM-L6-v2, a sentence encoder, and "
            "SmolLM2-135M-Instruct, a language model that predicts the next token (its first load takes "
            "about half a minute). Type any Hugging Face id (needs network) or the path of a local model folder."
        )
    if chosen and chosen not in options:
        options.append(chosen)  # a model named in a link; refused with a message if not allowed
    with st.sidebar:
        option(st.selectbox, "Model", options, key="model", app=True, format_func=model_label,
               accept_new_options=not settings.server_mode, help=help_text)
        option(st.text_area, "Text to analyse", value=BANK_RIVER, key="text", app=True,
               max_chars=MAX_TEXT_CHARS, height=120)
        st.pills("Examples", list(EXAMPLE_SENTENCES), key="example", on_change=_use_example)
        from ui.seq2seq import render_target_box  # here, not at the top: ui.seq2seq imports this module

        render_target_box()  # encoder-decoder models only
        with st.expander("Display"):
            option(st.toggle, "Presentation mode", key="present", app=True,
                   help="Large fonts on a white background, for screenshots and slides.")
            option(st.radio, "Figure download format", ["PNG", "SVG"], key="img", app=True, horizontal=True,
                   help="What the camera button in each figure's toolbar saves (PNG at 3× resolution).")


def current_model_name() -> str:
    """The sidebar's model; a bundled model by its one canonical name, so that its aliases share one copy."""
    name = (option_value("model", app=True) or DEFAULT_MODEL).strip() or DEFAULT_MODEL
    return bundled_name(name) or name


def current_text() -> str:
    return option_value("text", app=True) or ""


def current_model() -> LoadedModel:
    """The sidebar's model, loaded once per process. Raises ``ModelLoadError`` with a user message."""
    name = current_model_name()
    settings = current_settings()
    if not settings.model_allowed(name):
        allowed = ", ".join(_offered_models(settings))
        raise ModelLoadError(
            f"This workshop server does not load `{name}`: it offers only {allowed}. "
            "Pick one of those in the sidebar."
        )
    with st.spinner(f"Loading {name}…"):
        return cached_model(name)


def current_token_limit() -> int:
    """Tokens analysed per text: the model's limit, capped by the deployment setting.

    Every cache of results derived from the sidebar's text takes this, so that they all
    describe the same tokens as ``current_analysis()``.
    """
    return min(current_settings().max_tokens, current_model().max_tokens)


def current_analysis(max_tokens: int | None = None) -> Analysis:
    """The sidebar's text through the sidebar's model (cached). Raises ``AnalysisError`` for empty text."""
    model = current_model()
    limit = current_token_limit() if max_tokens is None else min(current_token_limit(), max_tokens)
    with st.spinner("Running the model…"):
        analysis = cached_analysis(current_model_name(), current_text(), limit)
    if analysis.truncated:
        reason = (
            f"{model.name} reads at most {model.max_tokens}"
            if analysis.num_tokens >= model.max_tokens
            else f"this page analyses at most {analysis.num_tokens}"
            if max_tokens is not None and max_tokens < current_token_limit()
            else f"this app is set to analyse at most {analysis.num_tokens}"
        )
        st.info(
            f"The text has {analysis.num_input_tokens} tokens and {reason}, "
            f"so only the first {analysis.num_tokens} are shown.",
            icon=":material/content_cut:",
        )
    return analysis


def presentation_mode() -> bool:
    return bool(option_value("present", app=True))


def image_format() -> str:
    return "svg" if option_value("img", app=True) == "SVG" else "png"
