"""What every step of the guided tour (app_pages/tour.py) draws with: its sentences, its one figure, its prompts and
links, and the previous-token head of the sidebar's text."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pandas as pd
import streamlit as st

from core.errors import UserFacingError
from core.teaching.tour import clearest_head, uniform_previous_share
from ui import results
from ui.figures import PRESENTATION_WIDTH, show_figure
from ui.models import has_language_model, language_model_of
from ui.page_state import link_url, option, set_option
from ui.session import current_model, current_model_name, current_text, current_token_limit, presentation_mode
from viz.common import file_stem, markdown_safe
from viz.tour import SLIDE_WIDTH, as_slide

# A slide is white whatever the viewer's theme: with the system in dark mode Streamlit's dark theme would write its
# light text, and draw its dark widgets, on the white slide (contrast 1.18:1). So the slide, its header and its
# widgets take the light theme's colours (.streamlit/config.toml [theme.light]) in both themes.
T = TypeVar("T")

PRESENTATION_CSS = """<style>
[data-testid="stHeader"], [data-testid="stMain"] { background: #ffffff; color: #121110; }
[data-testid="stHeader"] :is(button, button *) { color: rgba(18, 17, 16, 0.6); }
[data-testid="stMain"] :is(h1, h2, h3, p, li, strong, em, label, span, [data-testid="stMarkdownContainer"]) {
  color: #121110;
}
[data-testid="stMain"] [data-testid="stCaptionContainer"],
[data-testid="stMain"] [data-testid="stCaptionContainer"] * { color: rgba(18, 17, 16, 0.6); }
[data-testid="stMain"] :is(button, [data-baseweb="input"], [data-baseweb="base-input"], [data-baseweb="textarea"],
  [data-baseweb="select"] > div, input, textarea, [data-testid="stExpander"] details, [data-testid="stExpander"] summary) {
  background-color: #ffffff; color: #121110; -webkit-text-fill-color: #121110; border-color: rgba(18, 17, 16, 0.2);
}
[data-testid="stMain"] :is(input, textarea):disabled { background-color: #f8f8f7; }
[data-testid="stMain"] button:disabled, [data-testid="stMain"] button:disabled * { color: rgba(18, 17, 16, 0.4); }
[data-testid="stMain"] [data-testid="stProgress"] [role="progressbar"] > div { background-color: #f1f0ee; }
[data-testid="stMain"] [data-testid="stProgress"] [role="progressbar"] > div > div { background-color: #b8323f; }
[data-testid="stMain"] [data-testid="stSliderTickBar"] * { color: rgba(18, 17, 16, 0.6); }
[data-testid="stMain"] [data-testid="stMarkdownContainer"] p,
[data-testid="stMain"] [data-testid="stMarkdownContainer"] li { font-size: 1.6rem; line-height: 1.45; }
[data-testid="stMain"] h2 { font-size: 2.8rem; }
</style>"""


def say(text: str) -> None:
    """The step's plain sentences (markdown; anything the user typed must already be escaped)."""
    st.markdown(text)


def figure(fig, what: str, data: pd.DataFrame | None = None) -> None:
    """The step's one live figure: 16:9 in presentation mode, CSV of its numbers otherwise."""
    name = file_stem(current_model().name, "tour", what)
    if presentation_mode():
        # as_slide draws it SLIDE_WIDTH px wide: fit titles, ticks and legend to that width, not the page's
        show_figure(as_slide(fig), name=name, key=f"tour-{what}", width="content",
                    share=SLIDE_WIDTH / PRESENTATION_WIDTH)
    else:
        show_figure(fig, name=name, data=data, key=f"tour-{what}")


def try_this(text: str) -> None:
    if not presentation_mode():
        st.info(f"**Try this:** {text}", icon=":material/touch_app:")


def full_page(page: str, label: str, params: dict[str, object] | None = None) -> None:
    """A link (new tab) to the full page at ``page`` (its url path) showing the same state: the sidebar's model and
    text plus ``params``, the target page's options as its URL holds them. A link button, whose icon is hidden from
    screen readers: a ``:material/…:`` icon in markdown is read aloud by name ("open_in_new icon")."""
    if not presentation_mode():
        st.link_button(label, link_url(page, **(params or {})), icon=":material/open_in_new:")


def not_here(text: str) -> None:
    """This step does not apply to the model or text on screen: say why, and let the reader move on."""
    st.info(text + " Use **Next** to go on.", icon=":material/info:")


def previous_token_head(analysis):
    """``((layer, head, share) or None, chance level, head-statistics table, token roles)`` for the sidebar's text."""
    table, roles = results.head_stats(current_model_name(), current_text(), "attention", max_tokens=current_token_limit())
    best = clearest_head(table, "previous")
    return best, uniform_previous_share(roles), table, roles


def sink_names(roles) -> str:
    if roles.start_is_first_token:
        return "the first token" + (" and end-of-text tokens" if roles.end.any() else "")
    return "[CLS]/[SEP]-like special tokens"


LM, ATTENTION = "lm", "attention"

TRACKS = {ATTENTION: "From tokens to a corpus", LM: "How a language model predicts"}

INTROS = {
    ATTENTION: "Ten steps from tokens to a whole corpus. Every number is computed now, for the model and text in the "
               "sidebar. Use the buttons or the ← → keys.",
    LM: "Six steps through how a language model writes: what it predicts, how a sampler draws, when the answer "
        "becomes readable in the layers, which heads copy, which activations carry a detail, and which routes "
        "through the layers carried the answer. Every number is computed now, for the model and text in the "
        "sidebar. Use the buttons or the ← → keys.",
}

def is_language_model() -> bool:
    """The model on screen is a causal language model with its head (the LM track applies)."""
    model = current_model()
    if not model.is_decoder or model.is_encoder_decoder:
        return False
    name = current_model_name()
    return has_language_model(name) and language_model_of(name).kind == "next"

def choose_track(tracks: dict[str, list]) -> tuple[list, str]:
    """The tour's steps and its introduction, from ``tracks`` (each track's steps under its key): for a causal
    language model a switch between the two tracks (the language-model track by default), otherwise the attention
    track alone."""
    if not is_language_model():
        return tracks[ATTENTION], INTROS[ATTENTION]
    track = option(st.segmented_control, "Track", list(TRACKS), format_func=TRACKS.get, default=LM, required=True,
                   key="track", label_visibility="collapsed", on_change=set_option, args=("step", 1))
    return tracks[track], INTROS[track]


def computed(bar, compute: Callable[[], T], errors: type[Exception] | tuple = UserFacingError) -> T | None:
    """``compute()`` behind the progress bar ``bar``, emptied when it ends; None, after saying why in the step's
    place, when it raises one of ``errors`` (sentences meant for the user)."""
    try:
        return compute()
    except errors as err:
        not_here(markdown_safe(str(err)))
        return None
    finally:
        bar.empty()
