"""The corpus a session works on: the sample corpus, or one the user uploaded or pasted.

``current_corpus()`` is what pages read; ``render_corpus_picker()`` is the widget the
drift page shows. The chosen corpus lives in ``st.session_state`` for the whole session
(an upload cannot live in a link); a file that cannot be read shows a message and keeps
the previous corpus.
"""

from __future__ import annotations

import streamlit as st

from core.representations.corpus import (
    MAX_DOCUMENT_CHARS,
    MAX_DOCUMENTS,
    MAX_UPLOAD_BYTES,
    UPLOAD_TYPES,
    CorpusError,
    Document,
    documents_from_table,
    documents_from_text,
    documents_from_txt,
    file_kind,
    guess_text_column,
    guess_title_column,
    read_table,
    sample_corpus,
    text_columns,
)
from ui.session import current_settings

CORPUS_KEY = "corpus_documents"
CORPUS_NAME_KEY = "corpus_name"
SAMPLE_NAME = "the sample corpus"
SOURCES = ["Sample corpus", "Upload a file", "Paste text"]
NO_TITLE = "(none: use the first words)"


def current_corpus() -> list[Document]:
    """The uploaded or pasted corpus of this session, else the sample corpus."""
    return list(st.session_state.get(CORPUS_KEY) or sample_corpus())


def current_corpus_name() -> str:
    """A short name for the current corpus, for captions ("the sample corpus", "poems.csv")."""
    return st.session_state.get(CORPUS_NAME_KEY) if st.session_state.get(CORPUS_KEY) else SAMPLE_NAME


def within_deployment_limits(documents: list[Document], size_bytes: int, source: str) -> list[Document]:
    """Apply the workshop-server caps (``core.model.settings``), which may be tighter than the corpus module's own."""
    settings = current_settings()
    if size_bytes > settings.max_upload_bytes:
        raise CorpusError(f"{source} has {size_bytes / 1e6:.1f} MB; this server accepts at most {settings.max_upload_mb} MB.")
    if len(documents) > settings.max_corpus_docs:
        raise CorpusError(f"{source} has {len(documents):,} documents; this server accepts at most {settings.max_corpus_docs:,}.")
    return documents


def _use(documents: list[Document] | None, name: str) -> None:
    st.session_state[CORPUS_KEY] = tuple(documents) if documents else None
    st.session_state[CORPUS_NAME_KEY] = name


def _documents_from_upload(upload) -> list[Document]:
    data = upload.getvalue()
    if file_kind(upload.name) == "txt":
        return documents_from_txt(data, upload.name)
    table = read_table(data, upload.name)
    columns = text_columns(table)
    left, right = st.columns(2)
    text_column = left.selectbox(
        "Text column", columns, index=columns.index(guess_text_column(table)), key="corpus_text_column"
    )
    title_guess = guess_title_column(table)
    title_options = [NO_TITLE] + [c for c in columns if c != text_column]
    title_column = right.selectbox(
        "Title column (optional)",
        title_options,
        index=title_options.index(title_guess) if title_guess in title_options else 0,
        key="corpus_title_column",
    )
    return documents_from_table(
        table, text_column, None if title_column == NO_TITLE else title_column, source=f"The file {upload.name}"
    )


def render_corpus_picker() -> None:
    """Choose the corpus: the sample, an uploaded .txt/.csv/.parquet file, or pasted text."""
    source = st.segmented_control(
        "Corpus", SOURCES, default=SOURCES[0], key="corpus_source", required=True, persist_state="session"
    )
    if source == SOURCES[0]:
        _use(None, SAMPLE_NAME)
        return
    limits = f"At most {MAX_DOCUMENTS} documents of {MAX_DOCUMENT_CHARS:,} characters each"
    if source == SOURCES[1]:
        upload = st.file_uploader(
            "A .txt file (one document per blank-line-separated block), or a .csv or .parquet table "
            "with a text column and an optional title column",
            type=list(UPLOAD_TYPES),
            key="corpus_file",
            max_upload_size=max(1, MAX_UPLOAD_BYTES // (1024 * 1024)),
            help=f"{limits}; files up to {MAX_UPLOAD_BYTES // (1024 * 1024)} MB.",
        )
        if upload is None:
            st.caption(f"Until you upload a file the page uses {current_corpus_name()}.")
            return
        try:
            documents = within_deployment_limits(_documents_from_upload(upload), upload.size, f"The file {upload.name}")
        except CorpusError as err:
            st.error(f"{err} The page keeps using {current_corpus_name()}.", icon=":material/error:")
            return
        _use(documents, upload.name)
        return
    pasted = st.text_area(
        "Documents, separated by a blank line", key="corpus_paste", height=160, help=f"{limits}.", persist_state="session"
    )
    if st.button("Use these documents", key="corpus_paste_use"):
        try:
            documents = documents_from_text(pasted)
            _use(within_deployment_limits(documents, len(pasted.encode()), "The pasted text"), "the pasted documents")
        except CorpusError as err:
            st.error(f"{err} The page keeps using {current_corpus_name()}.", icon=":material/error:")
