"""Keep every page inside the app shell (sidebar, error boundary) defined in app.py."""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager


def require_app_shell() -> None:
    """Call first in every file of ``pages/``.

    Streamlit still has its old multipage mode: a process that has not yet run
    ``st.navigation`` treats a ``pages/`` folder as pages of their own. When the
    first visit to a fresh server is a deep link (``/attention?text=…``) it would
    run that file alone, without app.py's sidebar. This switches the process to
    ``st.navigation``'s mode and runs the request again through app.py.
    """
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
