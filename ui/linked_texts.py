"""Long texts in links: a text too long for a URL parameter travels as a short content id, and the text is kept in
this process under that id (``ui.page_state`` writes and reads them)."""

from __future__ import annotations

import hashlib
from urllib.parse import quote

import streamlit as st

from ui.bounded_cache import BoundedCache

URL_TEXT_MAX_BYTES = 2_000  # percent-encoded bytes of one text parameter; far below every server's limit
LINKED_TEXTS = 2_000  # long texts kept per process for links
LINKED_TEXT_BYTES = 100_000_000
ID_SUFFIX = "_id"


@st.cache_resource(show_spinner=False)
def linked_texts() -> BoundedCache:
    """Long texts named by links (content id → text), shared by every session of this process."""
    return BoundedCache(max_entries=LINKED_TEXTS, max_bytes=LINKED_TEXT_BYTES, size_of=lambda text: len(text.encode()))


def text_id(text: str) -> str:
    """The short content id of a text (12 hex digits of its SHA-256)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def encoded_bytes(text: str) -> int:
    """Bytes of ``text`` as a URL parameter value (UTF-8, percent-encoded as the browser sends it)."""
    return len(quote(text, safe=""))


def fits_in_url(text: str) -> bool:
    return encoded_bytes(text) <= URL_TEXT_MAX_BYTES
