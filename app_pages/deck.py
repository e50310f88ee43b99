"""Deck: the figures pinned from every page ("Pin to deck" under each figure) as slides: reorder, retitle, remove;
a title slide and an optional slide about the model; downloads as PowerPoint and as one self-contained HTML file."""

import datetime
from functools import partial

import streamlit as st

from core.teaching.about import facts_lines
from ui import deck, results
from ui.explain import explain
from ui.figures import PRESENTATION_WIDTH
from ui.page_state import option, page_param, write_page_param
from ui.session import current_model_name, current_text, current_token_limit
from ui.stoppable import StopFlag, progress_with_stop
from ui.view_figures import NotFromLink, redraw
from viz.common import markdown_safe
from viz.deck import Deck, deck_file_stem, image_options, slide_figure, thumbnail
from viz.deck_html import html_deck
from viz.deck_pptx import figures_zip, pptx_bytes
from viz.deck_render import render_pngs

RENDERED = "deck.rendered"  # (what was drawn: figures and theme, the PNGs)
LINK_SEEN = "deck.link"  # the ?pins= value this session last wrote (a different one is a link followed)
STOP = StopFlag("deck.stopped")
REDRAW_STOP = StopFlag("deck.redraw-stopped")
NOT_FROM_LINK = "deck.not-from-link"  # pin's view: the sentence saying why its link cannot draw its figure

st.title("Deck")
explain("Every figure has a **Pin to deck** button beside its downloads. The pinned figures are listed here as "
        "slides: put them in order, give them titles, then download the deck as PowerPoint (one 16:9 slide per figure, "
        "1920 × 1080, the sentence under it and the link that draws it again in the speaker notes) or as one HTML "
        "file that works offline (interactive figures, arrow keys to move, print it for a PDF). This page's link "
        "holds the deck: bookmark or share it.", caption=True)

# --- the pins: the link's when a link was followed, else the session's --------------------------------------------------
linked = page_param("pins")
if linked is not None and linked != st.session_state.get(LINK_SEEN):
    try:
        deck.set_pins(deck.decode_pins(linked))
    except deck.BadDeckLink as err:
        deck.set_pins([])
        st.warning(str(err), icon=":material/link_off:")
limit = deck.slide_limit()
pins = deck.pins()
if len(pins) > limit:
    st.warning(f"This deck had {len(pins)} slides; only the first {limit} are kept. " + deck.limit_sentence(limit),
               icon=":material/block:")
    pins = pins[:limit]
    deck.set_pins(pins)
value = deck.encode_pins(pins)
write_page_param("pins", value or None)
st.session_state[LINK_SEEN] = value or None

left, right = st.columns([3, 2])
title = option(left.text_input, "Deck title", value="What a transformer does with a sentence", key="title",
               max_chars=200)
author = option(left.text_input, "Author line", value="", key="author", max_chars=200,
                placeholder="Your name, where and when")
date = option(right.text_input, "Date", value="", key="date", max_chars=60,
              placeholder=datetime.date.today().isoformat()) or datetime.date.today().isoformat()
theme = option(right.segmented_control, "Slides in", ["light", "dark"], format_func=str.capitalize, default="light",
               required=True, key="theme")
about = option(right.toggle, "A slide about the model", value=False, key="about",
               help="The model card of the sidebar's model, as the Home page writes it, on the second slide")
st.caption(f"{len(pins)} of at most {limit} slides. " + deck.limit_sentence(limit))


def _set(index: int, step: int | None) -> None:
    """Move pin ``index`` by ``step`` places, or (``step`` None) remove it."""
    current = deck.pins()
    deck.set_pins(deck.moved(current, index, step) if step is not None else current[:index] + current[index + 1:])


def _retitle(index: int, key: str) -> None:
    deck.set_pins(deck.retitled(deck.pins(), index, st.session_state[key].strip() or deck.pins()[index].name))


slides, missing = deck.slides_of(pins)
# --- figures neither this process nor the store keeps (too big, pushed out): drawn again from their links, slide by slide
unreachable: dict = st.session_state.setdefault(NOT_FROM_LINK, {})
to_draw = [pin for pin in missing if pin.view not in unreachable]
drawing = tuple(pin.view for pin in to_draw)
if to_draw and not REDRAW_STOP.stopped(drawing):
    with progress_with_stop("Drawing the pinned figures again from their links…", "Figure {done} of {total} drawn",
                            on_stop=REDRAW_STOP.stop, args=(drawing,), button_key="deck-redraw-stop",
                            help="Stop drawing; the slides drawn so far are kept") as progress:
        for done, pin in enumerate(to_draw, start=1):
            try:
                drawn = redraw(pin)
            except NotFromLink as err:
                unreachable[pin.view] = str(err)
            else:
                deck.keep_drawn(pin, drawn.figure, drawn.data, drawn.sentence)
            progress(done, len(to_draw))
    slides, missing = deck.slides_of(pins)
elif to_draw:
    REDRAW_STOP.offer_to_go_on(f"Drawing the pinned figures again was stopped with {len(to_draw)} left.",
                               "Draw the rest", "deck-redraw-go-on")
if not pins:
    st.info("No figure is pinned yet: open a page and click **Pin to deck** under a figure.", icon=":material/push_pin:")
for index, pin in enumerate(pins):
    with st.container(border=True):
        picture, words = st.columns([2, 3], vertical_alignment="center")
        kept = deck.kept_figure(pin)
        if kept is None:
            picture.caption(markdown_safe(unreachable.get(pin.view, "Not drawn yet: open the view to draw it again.")))
        else:
            picture.plotly_chart(thumbnail(kept.figure), config={"staticPlot": True}, key=f"deck-thumb-{index}",
                                 width="stretch")
        key = f"deck.pin-title.{index}.{deck.canonical(pin.query)[:40]}.{pin.name}"
        if st.session_state.get(key) is None:
            st.session_state[key] = pin.title
        words.text_input(f"Title of slide {index + 1}", key=key, max_chars=200, on_change=_retitle, args=(index, key))
        if pin.sentence:
            words.caption(markdown_safe(pin.sentence))
        with words.container(horizontal=True, gap="small"):
            st.button("Up", key=f"deck-up-{index}", on_click=_set, args=(index, -1), disabled=index == 0,
                      icon=":material/arrow_upward:")
            st.button("Down", key=f"deck-down-{index}", on_click=_set, args=(index, 1), disabled=index == len(pins) - 1,
                      icon=":material/arrow_downward:")
            st.button("Remove", key=f"deck-remove-{index}", on_click=_set, args=(index, None), icon=":material/delete:")
            st.link_button("Open the view", pin.link, icon=":material/open_in_new:")

if missing:
    deck.want(missing)
    st.warning(f"{len(missing)} pinned figure{'s' if len(missing) > 1 else ''} could not be drawn again from "
               f"{'their links' if len(missing) > 1 else 'its link'} (each slide says why): open each view once with "
               "its **Open the view** button and the figure is kept again; the downloads hold the other slides.",
               icon=":material/sync_problem:")
    st.button("Check again", icon=":material/refresh:")

about_lines: tuple[str, ...] = ()
if about:
    facts = results.model_facts(current_model_name(), current_text(), max_tokens=current_token_limit())
    about_lines = tuple(facts_lines(facts))
made = Deck(title=title.strip() or "Deck", author=author.strip(), date=date.strip(), about=about_lines,
            about_title=f"About {current_model_name()}", slides=tuple(slides), theme=theme)
stem = deck_file_stem(made.title)

# --- downloads -------------------------------------------------------------------------------------------------------
st.header("Download")
if not slides:
    st.caption("The downloads appear when the deck has a figure this server keeps.")
else:
    html_of = partial(lambda d: html_deck(d, [slide_figure(s.figure, PRESENTATION_WIDTH, d.theme)
                                               for s in d.slides]).encode("utf-8"), made)
    st.download_button("Download HTML", html_of, file_name=f"{stem}.html", mime="text/html", on_click="ignore",
                       icon=":material/download:", help="One file: interactive figures, arrow keys move, print for PDF")
    drawn = (tuple(s.link for s in slides), theme)
    rendered = st.session_state.get(RENDERED)
    if st.button(f"Draw the {len(slides)} slide{'s' if len(slides) > 1 else ''} for PowerPoint",
                 icon=":material/slideshow:", disabled=rendered is not None and rendered[0] == drawn):
        STOP.clear()
        with progress_with_stop("Drawing the slides…", "Slide {done} of {total} drawn", on_stop=STOP.stop,
                                args=(drawn,), button_key="deck-stop", help="Stop drawing; nothing is kept") as progress:
            figures = [slide_figure(s.figure, PRESENTATION_WIDTH, theme) for s in slides]
            rendered = (drawn, render_pngs(figures, image_options(PRESENTATION_WIDTH), progress))
        st.session_state[RENDERED] = rendered
    if STOP.stopped(drawn):
        st.info("Drawing was stopped before the last slide; draw them again to download the PowerPoint.",
                icon=":material/stop_circle:")
    ready = rendered is not None and rendered[0] == drawn
    pngs = rendered[1] if ready else []
    st.download_button("Download PowerPoint", partial(pptx_bytes, made, pngs) if ready else b"", file_name=f"{stem}.pptx",
                       mime="application/vnd.openxmlformats-officedocument.presentationml.presentation",
                       on_click="ignore", icon=":material/download:", disabled=not ready,
                       help=None if ready else "Draw the slides first (the button above)")
    st.download_button("Download the figures (PNG and CSV, zip)", partial(figures_zip, made, pngs) if ready else b"",
                       file_name=f"{stem}-figures.zip", mime="application/zip", on_click="ignore",
                       icon=":material/folder_zip:", disabled=not ready)
