"""The sidebar's text from an uploaded .txt file (issue 41): a long text need not be pasted.

The file's text becomes the sidebar's text (``set_option("text", …)``), so it survives reruns, every page reads it,
and a link carries it as every long text: kept on the server under a short content id (``ui.page_state``).
"""

from __future__ import annotations

import streamlit as st

from core.errors import UserFacingError
from ui.page_state import set_option

UPLOAD_KEY = "text_file"
NOTE_KEY = "text_file_note"


class TextUploadError(UserFacingError, ValueError):
    """An uploaded file the app cannot use as the text. The message is a sentence for the user."""


def text_from_upload(name: str, data: bytes, max_bytes: int, max_chars: int) -> tuple[str, str | None]:
    """``(text, note)`` from an uploaded file's bytes: UTF-8 (a byte-order mark allowed, UTF-16 with its mark), cut to
    ``max_chars`` characters (``note`` says so; else None). Raises ``TextUploadError`` for a file over ``max_bytes``,
    one that is not text in those encodings, or one with no text."""
    if len(data) > max_bytes:
        raise TextUploadError(f"The file {name} has {len(data):,} bytes, more than the {max_bytes:,} this app accepts: "
                              "upload a shorter text.")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        encoding = "utf-16"
    else:
        encoding = "utf-8-sig"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as err:
        raise TextUploadError(f"The file {name} is not UTF-8 text (byte {err.start:,} cannot be read as UTF-8): save it "
                              "as UTF-8 plain text and upload it again.") from err
    if "\x00" in text:
        raise TextUploadError(f"The file {name} holds NUL characters, so it is not a plain text file: upload a .txt "
                              "file.")
    text = text.replace("\r\n", "\n")
    if not text.strip():
        raise TextUploadError(f"The file {name} has no text in it.")
    if len(text) > max_chars:
        return text[:max_chars], (f"The file {name} has {len(text):,} characters; the text box holds {max_chars:,}, "
                                  f"so its first {max_chars:,} are used.")
    return text, None


def use_uploaded_text(max_bytes: int, max_chars: int) -> None:
    """``on_change`` of the sidebar's uploader: a newly chosen file becomes the text (an edit typed afterwards stays,
    because this runs only when the file changes)."""
    upload = st.session_state.get(UPLOAD_KEY)
    if upload is None:
        st.session_state[NOTE_KEY] = None
        return
    try:
        text, note = text_from_upload(upload.name, upload.getvalue(), max_bytes, max_chars)
    except TextUploadError as err:
        st.session_state[NOTE_KEY] = ("warning", f"{err} The text box keeps its text.")
        return
    set_option("text", text, app=True)
    st.session_state[NOTE_KEY] = ("info", note) if note else None
