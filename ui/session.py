"""What pages read from the shared sidebar (model, text, settings), through the URL-bound options."""

from __future__ import annotations

from functools import lru_cache

import streamlit as st

from core.model.analysis import Analysis
from core.model.bundled_lm import bundled_lm
from core.model.models import BUNDLED_MODELS, DEFAULT_MODEL, LoadedModel, ModelLoadError, bundled_name
from core.model.settings import Settings, load_settings
from core.teaching.examples import SUGGESTED_MODELS
from core.workshop.settings import RoomSettings, load_room_settings
from ui import results
from ui.models import loaded_model
from ui.page_limits import PAGE_LIMITS, limit_sentence, page_limit
from ui.page_state import current_page, option_value
from ui.trace_progress import trace_of

MAX_TEXT_CHARS = 100_000  # far past any model limit; the tokenizer truncates with a notice


def app_secrets() -> dict:
    """``.streamlit/secrets.toml`` as a mapping ({} without one)."""
    try:
        return {key: st.secrets[key] for key in st.secrets}
    except Exception:  # noqa: BLE001 - no secrets file is the normal laptop case
        return {}


def current_settings() -> Settings:
    """Laptop or workshop-server settings, from the environment or ``.streamlit/secrets.toml``."""
    return load_settings(app_secrets())


def current_room_settings() -> RoomSettings:
    """Where the workshop rooms (and the pinned figures, ``ui.deck``) are stored, and the rooms' limits."""
    return load_room_settings(app_secrets())


def offered_models(settings: Settings) -> list[str]:
    """Both bundled models first, then the server's allowed models or the laptop's suggestions."""
    others = [m for m in settings.allowed_models if m != "*"] if settings.server_mode else list(SUGGESTED_MODELS)
    return list(BUNDLED_MODELS) + [m for m in others if bundled_name(m) is None]


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
        allowed = ", ".join(offered_models(settings))
        raise ModelLoadError(
            f"This workshop server does not load `{name}`: it offers only {allowed}. "
            "Pick one of those in the sidebar."
        )
    with st.spinner(f"Loading {name}…"):
        return loaded_model(name)


def app_token_limit(model: LoadedModel | None = None) -> int:
    """Tokens the app reads per text with ``model`` (default: the sidebar's): its whole window
    (``LoadedModel.max_tokens``), capped by the deployment setting (``EXPLORER_MAX_TOKENS``: none on a laptop, 256 on a
    workshop server)."""
    cap, window = current_settings().max_tokens, (model or current_model()).max_tokens
    return window if cap is None else min(cap, window)


def token_limit_on(page: str, model: LoadedModel) -> int:
    """Tokens analysed per text on ``page`` with ``model``: ``app_token_limit(model)``, capped by the page's own limit
    (``ui.page_limits.PAGE_LIMITS``)."""
    limit, own = app_token_limit(model), page_limit(page, model)
    return limit if own is None else min(limit, own)


def current_token_limit() -> int:
    """Tokens analysed per text on this page with the sidebar's model (``token_limit_on``).

    Every cache of results derived from the sidebar's text takes this, so that they all
    describe the same tokens as ``current_analysis()``.
    """
    return token_limit_on(current_page(), current_model())


@lru_cache(maxsize=32)
def _token_count(model_name: str, text: str) -> int:
    return len(current_model().tokenizer(text, add_special_tokens=True, truncation=False)["input_ids"])


def page_limit_notice() -> None:
    """Above the page, before it computes anything: which token limit the page applies to the sidebar's text and
    why, when that limit cuts the text (``ui.page_limits``). ``app.py`` calls it on every run."""
    rule = PAGE_LIMITS.get(current_page())
    text = current_text()
    if rule is None or not rule.reads_text or not text.strip():
        return
    model = current_model()
    if getattr(model, "is_encoder_decoder", False) or rule.tokens(model) >= app_token_limit():
        return
    sentence = limit_sentence(current_page(), model, _token_count(current_model_name(), text), app_token_limit())
    if sentence is not None:
        st.info(sentence, icon=":material/content_cut:")


def current_analysis(max_tokens: int | None = None) -> Analysis:
    """The sidebar's text through the sidebar's model (cached). Raises ``AnalysisError`` for empty text."""
    model = current_model()
    limit = current_token_limit() if max_tokens is None else min(current_token_limit(), max_tokens)
    if results.analyses.peek(current_model_name(), current_text(), max_tokens=limit) is None:
        trace_of(current_model_name(), current_text(), limit)  # the one pass, with progress and Stop on a long text
    with st.spinner("Running the model…"):
        analysis = results.analyses(current_model_name(), current_text(), max_tokens=limit)
    if analysis.truncated and (max_tokens is not None or analysis.num_tokens >= app_token_limit()):
        # (a cut by the page's own limit was said above the page, by page_limit_notice)
        lm = bundled_lm(model.name)
        window = getattr(model.model.config, "max_position_embeddings", None)
        reason = (
            f"this app reads at most {model.max_tokens:,} with {model.name} (its window is {window:,} tokens, but "
            f"{lm.cap_reason})"
            if analysis.num_tokens >= model.max_tokens and lm is not None and lm.max_tokens == model.max_tokens
            and isinstance(window, int) and window > model.max_tokens
            else f"{model.name} reads at most {model.max_tokens:,}"
            if analysis.num_tokens >= model.max_tokens
            else f"this page analyses at most {analysis.num_tokens:,}"
            if max_tokens is not None and max_tokens < current_token_limit()
            else f"this app is set to analyse at most {analysis.num_tokens:,}"
        )
        st.info(
            f"The text has {analysis.num_input_tokens:,} tokens and {reason}, "
            f"so only the first {analysis.num_tokens:,} are shown.",
            icon=":material/content_cut:",
        )
    return analysis


def presentation_mode() -> bool:
    return bool(option_value("present", app=True))


def image_format() -> str:
    return "svg" if option_value("img", app=True) == "SVG" else "png"
