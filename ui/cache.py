"""The app's Streamlit caches, in one place. Everything else calls ``core`` directly.

Keys are small and hashable (model name, text, numbers); tensors and large arrays
are never hashed. Cached objects are shared by every session, so they are
read-only (``Analysis`` freezes its arrays).
"""

from __future__ import annotations

import streamlit as st

from core.inference import Analysis, analyze
from core.models import LoadedModel, load_model
from ui.bounded_cache import BoundedCache

MAX_MODELS = 3
MAX_ANALYSES = 64
# One 512-token analysis of a 12-layer, 12-head model holds about 150 MB of attention.
MAX_ANALYSIS_BYTES = 1_500_000_000


@st.cache_resource(max_entries=MAX_MODELS, show_spinner=False)
def cached_model(name: str) -> LoadedModel:
    """One ``LoadedModel`` per name and process."""
    return load_model(name)


@st.cache_resource(show_spinner=False)
def bounded_store(name: str, max_entries: int, max_bytes: int) -> BoundedCache:
    """A process-wide cache bounded in entries and bytes, one per ``name``."""
    return BoundedCache(max_entries=max_entries, max_bytes=max_bytes)


def cached_analysis(model_name: str, text: str, max_tokens: int | None = None) -> Analysis:
    """One ``Analysis`` per (model, text, token limit), so changing a view never re-runs the model."""
    model = cached_model(model_name)
    store = bounded_store("analyses", MAX_ANALYSES, MAX_ANALYSIS_BYTES)
    return store.get_or_compute((model_name, text, max_tokens), lambda: analyze(model, text, max_tokens=max_tokens))
