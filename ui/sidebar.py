"""The shared sidebar: model picker, text box, examples, the encoder-decoder target box and display settings."""

from __future__ import annotations

import streamlit as st

from core.model.bundled_lm import BUNDLED_LMS, GEMMA_NAME, WAIT, bundled_lm, cache_ready
from core.model.models import BUNDLED_KINDS, bundled_name
from core.teaching.examples import BANK_RIVER, EXAMPLE_SENTENCES
from ui.page_state import option, option_value, set_option
from ui.seq2seq import render_target_box
from ui.session import MAX_TEXT_CHARS, current_settings, offered_models
from ui.text_upload import NOTE_KEY, UPLOAD_KEY, use_uploaded_text
from ui.warmup import converting_language_model
from viz.common import markdown_safe

TEXT_UPLOAD_MB = 1  # the text box holds 100,000 characters, at most 400 kB of UTF-8


def model_label(name: str) -> str:
    """What the picker shows for ``name``: a bundled model with what it is, any other name as it is."""
    bundled = bundled_name(name) if isinstance(name, str) and name.strip() else None
    return f"{name} — {BUNDLED_KINDS[bundled]} (bundled)" if bundled else str(name)


def _licences() -> str:
    """The bundled language models' licences as Markdown links (text only: nothing is fetched)."""
    return "; ".join(f"{lm.name}, [{lm.licence}]({lm.licence_url})" for lm in BUNDLED_LMS)


def _use_example() -> None:
    choice = st.session_state.get("example")
    if choice in EXAMPLE_SENTENCES:
        set_option("text", EXAMPLE_SENTENCES[choice], app=True)
    st.session_state["example"] = None


def language_model_wait() -> str:
    """What choosing the bundled language model costs now: its converted cache is ready, being made since the server
    started, or made on its first load."""
    if converting_language_model.is_set():
        return f"its weights are being converted since the server started, {WAIT}; choosing it now waits for the rest"
    if cache_ready():
        return "converted on this machine already, it loads in seconds"
    return f"its first load converts its weights once, {WAIT}"


def render_sidebar() -> None:
    """Model picker, text box, examples and display options; app-wide options in the URL (``ui.page_state``)."""
    settings = current_settings()
    chosen = option_value("model", app=True) or st.query_params.get("model")
    options = offered_models(settings)
    if settings.server_mode:
        help_text = f"This workshop server offers only these models. Licences: {_licences()}."
    else:
        help_text = (
            "The bundled models work offline: all-MiniLM-L6-v2, a sentence encoder, and two language models "
            f"that predict the next token: SmolLM2-135M-Instruct, instruct-tuned ({language_model_wait()}), and "
            "gemma-3-270m, Google's Gemma 3 270M base model (its first load, unless `make setup` did it, converts "
            f"it once, {bundled_lm(GEMMA_NAME).wait}). Licences: {_licences()}. Type any Hugging Face id (needs network) or the path of a "
            "local model folder."
        )
    refused = None
    if chosen and chosen not in options:
        if settings.model_allowed(bundled_name(chosen) or chosen):
            options.append(chosen)  # a model named in a link
        else:
            refused = chosen  # never offered: the picker falls back to the first model and says why
    with st.sidebar:
        shown = option(st.selectbox, "Model", options, key="model", app=True, format_func=model_label,
                       accept_new_options=not settings.server_mode, help=help_text)
        if refused is not None:
            st.warning(f"The link asked for the model “{markdown_safe(refused)}”, which this workshop server does not "
                       f"load, so {markdown_safe(shown)} is shown instead.", icon=":material/block:")
        option(st.text_area, "Text to analyse", value=BANK_RIVER, key="text", app=True,
               max_chars=MAX_TEXT_CHARS, height=120)
        upload_mb = min(settings.max_upload_mb, TEXT_UPLOAD_MB)
        # Every file up to the server's cap reaches the app, whatever its name or size, so the one sentence under the
        # uploader is always about the file last chosen: a file the browser refused (too big, not .txt) would show
        # the widget's own error beside the previous file's sentence, which nothing on the server can clear.
        st.file_uploader(
            "Or upload a .txt file", key=UPLOAD_KEY, max_upload_size=settings.max_upload_mb,
            on_change=use_uploaded_text, args=(upload_mb * 1024 * 1024, MAX_TEXT_CHARS),
            help=f"UTF-8 plain text up to {upload_mb} MB; its first {MAX_TEXT_CHARS:,} characters go into the text box "
                 "(a long text's link holds a short id, which works while this server runs).",
        )
        note = st.session_state.get(NOTE_KEY)
        if note:
            (st.warning if note[0] == "warning" else st.info)(note[1], icon=":material/upload_file:")
        st.pills("Examples", list(EXAMPLE_SENTENCES), key="example", on_change=_use_example)
        render_target_box()  # encoder-decoder models only
        with st.expander("Display"):
            option(st.toggle, "Presentation mode", key="present", app=True,
                   help="Large fonts on a white background, for screenshots and slides.")
            option(st.radio, "Figure download format", ["PNG", "SVG"], key="img", app=True, horizontal=True,
                   help="What the camera button in each figure's toolbar saves (PNG 1920 pixels wide; in presentation "
                        "mode a 1920 × 1080 slide).")
