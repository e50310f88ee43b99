"""The workshop room page's Streamlit glue: opening a room, the presenter's projector and moderation, the learners'
view. The room store (``core.workshop``) is the truth of every screen: nothing of a room lives in a session, so a
reload, another replica or a replica that died shows the same room. Learners' text is shown through ``st.text`` and
``plotly_safe`` only (never as markdown or HTML)."""

from __future__ import annotations

import io
from urllib.parse import urlencode

import numpy as np
import pandas as pd
import segno
import streamlit as st

from core.errors import UserFacingError
from core.model.layers import head_code, hidden_state_label
from core.workshop.rooms import VIEWS, Room, RoomError, Workshop, new_learner, normal_code, shown_code
from core.workshop.settings import RoomSettings
from core.workshop.stores import open_store
from core.workshop.views import room_sentences, room_words, vote_counts, vote_sentences
from ui import results
from ui.errors import friendly_fragment
from ui.figures import DARK_BACKGROUND, show_figure
from ui.models import loaded_model
from ui.page_state import end_page, page_param
from ui.session import current_model_name, current_room_settings, current_settings, offered_models, presentation_mode
from viz.common import file_stem, markdown_safe, plotly_safe
from viz.room import room_map_figure, vote_figure
from viz.senses import highlighted_sentence

REFRESH_SECONDS = 1.5  # the projector reads the store this often: a submission shows within 3 s (a run takes < 1.5 s)
METHOD = "pca"  # places a new sentence at once, with no compilation (UMAP's first fit takes 10 s or more)
PAGE = "room"


@st.cache_resource(show_spinner=False)
def workshop_for(settings: RoomSettings) -> Workshop:
    """One store connection per process and settings (a SQLite file or a Redis server shared by every replica)."""
    return Workshop(open_store(settings), settings)


def current_workshop() -> Workshop:
    return workshop_for(current_room_settings())


def page_url(**params: str) -> str:
    """An absolute link to this page with ``params`` (the host the browser used; localhost under AppTest)."""
    base = (st.context.url or "").split("?")[0].rstrip("/")
    base = base if base.endswith("/" + PAGE) else "http://localhost:8501/" + PAGE
    return f"{base}?{urlencode(params)}"


def qr_png(url: str) -> bytes:
    """The QR code of ``url`` as PNG bytes, drawn here (``segno``), never by a web service."""
    out = io.BytesIO()
    segno.make(url, error="m").save(out, kind="png", scale=8, border=2)
    return out.getvalue()


def open_room_form(workshop: Workshop) -> tuple[str, str] | None:
    """Choose the model, the word and the view, then "Open a room": the new room's code and presenter's secret."""
    st.markdown("Open a room, show its code and QR code on the projector, and every learner's sentence lands on "
                "one shared map, live.")
    models = [m for m in offered_models(current_settings()) if current_settings().model_allowed(m)]
    current = current_model_name()
    model = st.selectbox("Model of the room", models, index=models.index(current) if current in models else 0, key="room.model")
    view = st.radio("What learners do", list(VIEWS), format_func=VIEWS.get, key="room.view")
    word = st.selectbox("Word", room_words(), index=room_words().index("bank"), key="room.word",
                        disabled=view != "senses", help="The built-in sentences of this word are the map.")
    s = workshop.settings
    st.caption(f"A room takes at most {s.max_entries:,} entries of {s.max_chars:,} characters, {s.per_minute} a "
               f"minute from each learner; this server holds {s.max_rooms} rooms at once, and a room is deleted "
               f"with its entries after {s.idle_hours:g} hours without activity.")
    if st.button("Open a room"):  # secondary: the primary colour on the dark theme fails WCAG contrast (3.0:1)
        room, secret = workshop.open_room(model, word, view)
        return room.code, secret
    return None


def presenter_header(room: Room, secret: str) -> None:
    learners = page_url(room=room.code)
    left, right = st.columns([3, 1])
    with left:
        st.markdown(f"## Room `{shown_code(room.code)}`")
        st.markdown(f"[Learners' link]({learners}): `{learners}`")
        what = (f"write a sentence with “{markdown_safe(room.word)}” in it" if room.view == "senses"
                else "vote for the head they think attends to the previous token")
        st.markdown(f"Learners open the link or scan the code and {what}. Model: {markdown_safe(room.model)}.")
        with st.expander("Presenter's link (moderates this room: keep it to yourself)"):
            st.code(page_url(room=room.code, key=secret), language=None)
    right.image(qr_png(learners), caption="Scan to join", width=200)


def entry_places(room: Room, texts: list[str]) -> list:
    """``core.workshop.views.EntryPlacement`` of each text at the last hidden state (None for one without the word)."""
    layer = loaded_model(room.model).num_layers
    return [results.room_placements(room.model, (text,), room.word, layer, METHOD) for text in texts]


def senses_map(room: Room, entries: list, me: str | None, key: str, dark: bool = False) -> list:
    """The built-in sentences' map with the visible ``entries`` on it (``me``'s as stars); returns their places."""
    model = loaded_model(room.model)
    layer = model.num_layers
    sentences, labels = room_sentences(room.word)
    bundled = results.occurrences(room.model, tuple(sentences), room.word)
    fitted = results.fitted_projections(room.model, tuple(sentences), room.word, layer, METHOD)
    places = entry_places(room, [e.text for e in entries])
    drawn = [(e, p) for e, p in zip(entries, places, strict=True) if p is not None]
    xy = np.array([p.xy for _, p in drawn], dtype=float).reshape(-1, 2)
    hovers = [highlighted_sentence(sentences[i], span) for i, span in zip(bundled.sentence_ids, bundled.spans, strict=True)]
    fig = room_map_figure(np.asarray(fitted.coords), [labels[i] for i in bundled.sentence_ids], hovers, xy,
                          [e.text for e, _ in drawn], [p.span for _, p in drawn], [e.learner == me for e, _ in drawn],
                          title=f"“{plotly_safe(room.word)}” at {hidden_state_label(layer, layer)}: {len(drawn)} "
                                f"learners' sentences among {bundled.count} built-in occurrences", axis="PCA")
    data = pd.DataFrame({"sentence": [e.text for e, _ in drawn], "x": xy[:, 0], "y": xy[:, 1],
                         "nearest_sense": [p.sense for _, p in drawn]})
    show_figure(fig, name=file_stem(room.model, "room", room.word), data=data, key=key, dark=dark)
    return places


def vote_panel(room: Room, entries: list, key: str, dark: bool = False) -> None:
    model = loaded_model(room.model)
    counts = vote_counts([(e.learner, e.text) for e in entries], model.num_layers, model.num_heads)
    scores = None
    if room.revealed:
        scores = results.previous_token(room.model, vote_sentences())
    fig = vote_figure(counts, None if scores is None else scores.scores, None if scores is None else scores.chance)
    show_figure(fig, name=file_stem(room.model, "room", "votes"), key=key, dark=dark,
                data=pd.DataFrame({"head": [head_code(la, h, *counts.shape) for la in range(counts.shape[0])
                                            for h in range(counts.shape[1])], "votes": counts.ravel()}))
    voters = int(counts.sum())
    if scores is not None:
        layer, head = scores.best()
        top = counts.max() if voters else 0
        chosen = [head_code(la, h, *counts.shape) for la, h in zip(*np.nonzero(counts == top), strict=True)] if voters else []
        st.markdown(
            f"Measured on {scores.texts} built-in sentences, the head that attends most to the previous token is "
            f"**{head_code(layer, head, *counts.shape)}** ({scores.scores[layer, head]:.2f} of its attention on "
            f"average; a head spreading its attention evenly would give {scores.chance:.2f}, the chance level). "
            + (f"The room's most voted head{'s are' if len(chosen) > 1 else ' is'} {', '.join(chosen)} ({top} of "
               f"{voters} votes)." if voters else "Nobody has voted yet."))
    else:
        st.caption(f"{voters} learners have voted; the measured scores appear when the presenter reveals them.")


def projector(code: str, secret: str, dark: bool) -> None:
    """What the room shows, read from the store again every ``REFRESH_SECONDS``: hidden entries vanish there too."""
    workshop = current_workshop()
    room = workshop.room(code)
    shown = workshop.visible(room.code)
    every = workshop.store.entries(room.code)
    state = "closed" if room.closed else "locked" if room.locked else "open"
    st.markdown(f"**{len(shown)} entries** on screen ({len(every) - len(shown)} hidden) · the room is {state}.")
    if room.view == "senses":
        senses_map(room, shown, None, "room-projector", dark)
    else:
        vote_panel(room, shown, "room-votes", dark)
    with st.expander("Moderate", expanded=not presentation_mode()):
        moderation(workshop, room, secret, every)


projector_live = friendly_fragment(projector, run_every=REFRESH_SECONDS)


def moderation(workshop: Workshop, room: Room, secret: str, every: list) -> None:
    def act(action: str, entry_id: int | None = None) -> None:
        workshop.moderate(room.code, secret, action, entry_id)

    cols = st.columns(5)
    cols[0].button("Unlock" if room.locked else "Lock", on_click=act, args=("unlock" if room.locked else "lock",),
                   disabled=room.closed, key="room.lock")
    if room.view == "vote":
        cols[1].button("Reveal the scores", on_click=act, args=("reveal",), disabled=room.revealed, key="room.reveal")
    cols[2].button("Clear", on_click=act, args=("clear",), key="room.clear", help="Delete every entry of this room.")
    cols[3].button("Close", on_click=act, args=("close",), disabled=room.closed, key="room.close",
                   help="Learners can no longer send; the entries stay until the room expires.")
    cols[4].download_button("CSV", workshop.csv_text(room.code, secret), file_name=f"room-{room.code}.csv",
                            mime="text/csv", key="room.csv", on_click="ignore")
    for entry in reversed(every):
        left, right = st.columns([6, 1], vertical_alignment="center")
        left.text(("(hidden) " if entry.hidden else "") + entry.text)
        right.button("Restore" if entry.hidden else "Hide", key=f"room.entry.{entry.id}", on_click=act,
                     args=("restore" if entry.hidden else "hide", entry.id))


def learner_view(workshop: Workshop, room: Room) -> None:
    me = page_param("me") or page_param("me", new_learner())
    s = workshop.settings
    st.markdown(f"## Room `{shown_code(room.code)}`")
    if room.closed:
        st.info("The presenter has closed this room: it takes no more entries. Every entry sent is still on the map "
                "below.", icon=":material/lock:")
    elif room.locked:
        st.info("The presenter has locked this room for now: entries wait until it is unlocked.", icon=":material/lock:")
    st.caption(f"An entry has at most {s.max_chars:,} characters; each learner sends at most {s.per_minute} a minute; "
               f"this room holds at most {s.max_entries:,} entries. The presenter sees every entry and can hide it.")
    if room.view == "senses":
        text = st.text_input("Your sentence", key="room.sentence", max_chars=None,
                             placeholder=f"A sentence with “{room.word}” in it")
        problem = workshop.problem(room, text) if text else None
        if problem:
            st.warning(problem, icon=":material/edit:")
    else:
        model = loaded_model(room.model)
        left, right = st.columns(2)
        layer = left.selectbox("Layer (counted from 0)", range(model.num_layers), key="room.layer")
        head = right.selectbox("Head", range(model.num_heads), key="room.head")
        text = head_code(layer, head, model.num_layers, model.num_heads)
    if st.button("Send", disabled=room.closed):
        try:
            workshop.submit(room.code, me, text)
        except RoomError as err:
            st.error(str(err), icon=":material/error:")
        else:
            st.success("Sent: " + ("your sentence is the black star on the map." if room.view == "senses"
                                   else f"your vote for {text}."), icon=":material/check:")
    shown = workshop.visible(room.code)
    if room.view == "vote":
        vote_panel(room, shown, "room-learner-votes")
        return
    places = senses_map(room, shown, me, "room-learner-map")
    mine = [(e, p) for e, p in zip(shown, places, strict=True) if e.learner == me and p is not None]
    if mine:
        entry, place = mine[-1]
        verdict = (f"most of them are **{markdown_safe(place.sense)}**" if place.sense
                   else "no sense has more of them than another")
        st.markdown(f"Your last sentence's “{markdown_safe(room.word)}” is nearest (cosine, in the model's full space) "
                    f"to these {len(place.neighbours)} built-in sentences ({markdown_safe(place.tally)}): {verdict}.")
        st.dataframe(place.neighbours, hide_index=True)


def room_page() -> None:
    """The whole page: the form without a room; the presenter's view with the room's secret; the learners' otherwise."""
    workshop = current_workshop()
    code, secret = page_param("room"), page_param("key")
    if not code:
        opened = open_room_form(workshop)
        if opened is None:
            end_page()
        code, secret = page_param("room", opened[0]), page_param("key", opened[1])
    try:
        room = workshop.room(normal_code(code))
    except UserFacingError as err:
        st.error(str(err), icon=":material/error:")
        st.text_input("Your sentence", key="room.sentence", disabled=True, help="Kept here: copy it if you need it.")
        end_page()
    if secret and workshop.is_presenter(room.code, secret):
        presenter_header(room, secret)
        dark = st.toggle("Dark projector", key="room.dark", help="A dark background for a dim room.")
        if dark:
            st.html(f"<style>[data-testid='stMain'] {{background: {DARK_BACKGROUND}; color: #fafafa}}</style>")
        projector_live(room.code, secret, dark)
        return
    if secret:
        st.error("This link's presenter key does not match this room: only the presenter's link can moderate it. "
                 "You see the learners' view.", icon=":material/key_off:")
    learner_view(workshop, room)
