"""The app's Streamlit caches, in one place. Everything else calls ``core`` directly.

Keys are small and hashable (model name, text, numbers); tensors and large arrays
are never hashed. Cached objects are shared by every session, so they are
read-only (``Analysis`` freezes its arrays).
"""

from __future__ import annotations

import streamlit as st

from core.inference import Analysis, analyze
from core.models import LoadedModel, load_model

MAX_MODELS = 3
MAX_ANALYSES = 64


@st.cache_resource(max_entries=MAX_MODELS, show_spinner=False)
def cached_model(name: str) -> LoadedModel:
    """One ``LoadedModel`` per name and process."""
    return load_model(name)


@st.cache_resource(max_entries=MAX_ANALYSES, show_spinner=False)
def cached_analysis(model_name: str, text: str, max_tokens: int | None = None) -> Analysis:
    """One ``Analysis`` per (model, text, token limit), so changing a view never re-runs the model."""
    return analyze(cached_model(model_name), text, max_tokens=max_tokens)
