"""Your own sentence on a senses map: the senses page and the tour's senses step share this."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from core.maths.projection import METHOD_NAMES, PLACEABLE, ProjectionError
from core.model.layers import hidden_state_label, since_hidden_state
from core.representations.placement import DEFAULT_K, first_settled_layer, nearest_occurrences, sense_votes
from ui import results
from viz.common import markdown_safe


@dataclass(frozen=True)
class PlacedSentence:
    """The first occurrence of the word in ``text``, placed among the labelled occurrences.

    ``coords``: ``[N, 2]`` of the fitted map the point was placed into (None when the method cannot
    place points, see ``why_not_drawn``); ``xy``: ``[2]`` its place on that map; ``neighbours`` and
    ``votes``: ``core.representations.placement.nearest_occurrences`` / ``sense_votes`` for every layer (full space).
    ``count``: occurrences of the word in the text (the first one is placed). ``in_set``: the text is itself one of
    the labelled sentences; its own occurrences are then left out of its neighbours.
    """

    text: str
    span: tuple[int, int]
    count: int
    in_set: bool
    coords: np.ndarray | None
    xy: np.ndarray | None
    why_not_drawn: str | None
    neighbours: pd.DataFrame
    votes: pd.DataFrame


def place_text(model_name: str, word: str, sentences: tuple[str, ...], point_labels: list[str], text: str,
               layer: int, method: str, k: int = DEFAULT_K) -> PlacedSentence | None:
    """Where the word of ``text`` lands among ``ui.results.occurrences(model_name, sentences, word)`` (labelled by
    ``point_labels``, one per occurrence) at ``layer``; None when ``text`` does not contain the word."""
    own = results.occurrences(model_name, (text,), word)
    if own.count == 0:
        return None
    occurrences = results.occurrences(model_name, sentences, word)
    query = own.vectors[:, 0]  # [layers + 1, hidden]
    in_set = [sentences[i].strip() == text.strip() for i in occurrences.sentence_ids]
    voters = ["" if own_sentence else label for label, own_sentence in zip(point_labels, in_set, strict=True)]
    neighbours = nearest_occurrences(occurrences.vectors, voters, query, k)
    neighbours.insert(4, "sentence", [sentences[occurrences.sentence_ids[i]] for i in neighbours["occurrence"]])
    coords = xy = None
    why = None
    if method in PLACEABLE:
        try:
            fitted = results.fitted_projections(model_name, sentences, word, layer, method)
        except ProjectionError as err:  # e.g. too few distinct vectors: the page draws its map without the star
            why = f"Your sentence is not drawn on this map: {err}"
        else:
            coords, xy = fitted.coords, fitted.transform(query[layer][None])[0]
    else:
        why = f"{METHOD_NAMES[method]} cannot place a new point into the map it drew; choose UMAP or PCA to see your sentence on it."
    return PlacedSentence(text, own.spans[0], own.count, any(in_set), coords, xy, why, neighbours, sense_votes(neighbours))


def verdict(placed: PlacedSentence, layer: int) -> str:
    """One markdown sentence, written from the numbers: which sense the neighbours vote for at ``layer``,
    and from which layer on the vote stays the same as at the last layer."""
    if placed.votes.empty:
        return "None of the sentences has a sense label, so there is no sense to vote for; label some (`river: …`)."
    row = placed.votes[placed.votes["layer"] == layer].iloc[0]
    last = placed.votes.iloc[-1]
    settled, final = first_settled_layer(placed.votes, last["sense"]), int(last["layer"])  # "layer": hidden state
    since = (
        f"{since_hidden_state(settled, final).capitalize()} the vote is **{markdown_safe(last['sense'])}**."
        if settled is not None and settled < final and not tied_vote(placed.neighbours, final) else ""
    )
    held_out = " Your sentence is one of the labelled sentences; it is left out of its own neighbours." if placed.in_set else ""
    vote = ("a tie: no sense wins the vote" if tied_vote(placed.neighbours, layer)
            else f"the vote is **{markdown_safe(row['sense'])}**")
    return (
        f"At {hidden_state_label(layer, final)} the {int(row['k'])} most similar labelled occurrences (cosine, in the model's full space) "
        f"are {markdown_safe(row['tally'])}: {vote}. {since}{held_out}"
    )


def tied_vote(neighbours: pd.DataFrame, layer: int) -> bool:
    """True when two senses share the most votes among the neighbours (``nearest_occurrences``) at ``layer``:
    ``sense_votes`` then picks one by summed cosine, a difference too small to name a sense by."""
    top = Counter(neighbours.loc[neighbours["layer"] == layer, "label"]).most_common(2)
    return len(top) == 2 and top[0][1] == top[1][1]


def show_placement(placed: PlacedSentence | None, word: str, layer: int) -> None:
    """The senses page's block under the map: where the sidebar's sentence landed, and its neighbours per layer."""

    word_md = markdown_safe(word)
    if placed is None:
        st.caption(f"Type a sentence with “{word_md}” in the sidebar to see where it lands on this map (“your sentence”).")
        return
    st.markdown(f"**Your sentence** (the sidebar's text) is the black star. {verdict(placed, layer)}")
    if placed.why_not_drawn:
        st.info(placed.why_not_drawn, icon=":material/info:")
    if placed.count > 1:
        st.caption(f"“{word_md}” occurs {placed.count} times in your text; the first occurrence is placed.")
    if placed.votes.empty:
        return
    with st.expander("The nearest labelled occurrences, layer by layer"):
        st.dataframe(placed.votes, hide_index=True)
        here = placed.neighbours[placed.neighbours["layer"] == layer]
        st.caption(f"At {hidden_state_label(layer)}:")
        st.dataframe(here, hide_index=True)
