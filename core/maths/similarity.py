"""Cosine similarity, the one measure of "how far did the embedding move" used across the app."""

from __future__ import annotations

import numpy as np

from core.model.analysis import Analysis


def cosine(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """Cosine similarity of ``a`` and ``b`` along ``axis`` (broadcasting), in float64.

    A zero vector has similarity 0 with everything rather than NaN.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    dot = np.sum(a * b, axis=axis)
    norms = np.linalg.norm(a, axis=axis) * np.linalg.norm(b, axis=axis)
    return np.divide(dot, norms, out=np.zeros_like(dot), where=norms > 0)


def token_static_similarity(analysis: Analysis) -> np.ndarray:
    """``[layers + 1, T]``: each token's cosine between layer k and the embedding layer (k = 0 gives 1)."""
    return cosine(analysis.hidden_states, analysis.hidden_states[0][None])
