"""The Queries and keys page's own Streamlit helpers (app_pages/qk-map.py): the corpus picker, clicks on its two
charts, the query picker's labels and the map drawn with each token in its context."""

from __future__ import annotations

import streamlit as st

from core.representations.corpus import CorpusError, documents_from_text, sample_corpus
from ui.corpus_state import current_corpus, current_corpus_name, within_deployment_limits
from ui.figures import clicked_point
from ui.page_state import end_page, option
from viz.qk_map import query_key_figure, token_in_context

SOURCES = ["Sample corpus", "Your documents", "The Drift page's corpus"]


def chosen_documents() -> tuple[list[str], str]:
    """The texts of the corpus picked on this page and its name for captions."""
    source = option(st.segmented_control, "Corpus", SOURCES, default=SOURCES[0], key="corpus", required=True)
    if source == SOURCES[0]:
        return [doc.text for doc in sample_corpus()], "the sample corpus"
    if source == SOURCES[2]:
        st.caption("The corpus chosen on the Drift page lives in this session only; a link to this view opens the "
                   "sample corpus unless it is pasted here.")
        return [doc.text for doc in current_corpus()], current_corpus_name()
    pasted = option(st.text_area, "Documents, separated by a blank line", value="", key="docs", height=140)
    if not pasted.strip():
        st.info("Paste some documents, separated by a blank line, to draw their queries and keys.", icon=":material/info:")
        end_page()
    try:
        documents = within_deployment_limits(documents_from_text(pasted), len(pasted.encode()), "The pasted text")
    except CorpusError as err:
        st.error(str(err), icon=":material/error:")
        end_page()
    return [doc.text for doc in documents], "the pasted documents"


def clicked(chart_key: str) -> list | None:
    """The ``customdata`` of the point last clicked on chart ``chart_key``, once per click (None otherwise)."""
    return clicked_point(chart_key, lambda data: list(data or []))


def query_label(qmap, i: int) -> str:
    """How the query picker names query ``i`` of ``qmap`` (-1: none)."""
    if i < 0:
        return "none"
    return f"{qmap.tokens[i]} (document {qmap.text_index[i] + 1}, position {qmap.position[i]})"


def map_figure(qmap, **style):
    """``viz.qk_map.query_key_figure`` of ``qmap``, each point's hover text its token in context."""
    contexts = [token_in_context(qmap.tokens, qmap.starts, qmap.text_index, i) for i in range(qmap.num_tokens)]
    return query_key_figure(qmap.coords, qmap.tokens, contexts, qmap.position, **style)
