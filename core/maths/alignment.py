"""Aligning 2-D layouts of the same points, so that a layer slider moves points instead of redrawing them.

UMAP, t-SNE and PCA are fitted anew for every layer; each fit is free to rotate, reflect, shift
and scale the picture. ``align_layout`` removes exactly those freedoms (orthogonal Procrustes
with translation and one uniform scale), and nothing else: distances within a layout keep their
ratios.
"""

from __future__ import annotations

import numpy as np


def align_layout(layout: np.ndarray, reference: np.ndarray, *, also: np.ndarray | None = None):
    """``layout`` ``[N, 2]`` rotated/reflected, shifted and uniformly scaled to best match ``reference`` ``[N, 2]``
    (least squares over the same N points). Returns a new array; degenerate inputs (fewer than 2 points,
    all points identical) come back centred on the reference's mean without rotation.

    ``also`` ``[M, 2]``: further points drawn in ``layout``'s frame (e.g. a sentence placed into the same
    fitted map); when given, returns ``(aligned layout, aligned also)`` moved by the same transform."""
    layout = np.asarray(layout, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if layout.shape != reference.shape or layout.ndim != 2:
        raise ValueError(f"layouts must have the same [N, d] shape, got {layout.shape} and {reference.shape}")
    layout_mean, reference_mean = layout.mean(axis=0), reference.mean(axis=0)
    a, b = layout - layout_mean, reference - reference_mean
    norm_a, norm_b = np.linalg.norm(a), np.linalg.norm(b)
    if len(layout) < 2 or norm_a < 1e-12 or norm_b < 1e-12:
        rotation, scale = np.eye(layout.shape[1]), 1.0
    else:
        from scipy.linalg import orthogonal_procrustes  # noqa: PLC0415 - SciPy's import cost, only when asked

        rotation, singular_sum = orthogonal_procrustes(a, b)  # the orthogonal R minimising |a R - b|, and Σ σ(aᵀb)
        scale = singular_sum / norm_a**2
    aligned = (a @ rotation) * scale + reference_mean
    if also is None:
        return aligned
    extra = (np.asarray(also, dtype=np.float64) - layout_mean) @ rotation * scale + reference_mean
    return aligned, extra


def align_point(layout: np.ndarray, reference: np.ndarray, point) -> np.ndarray:
    """One further point ``[2]`` drawn in ``layout``'s frame, moved by the transform that aligns ``layout`` with
    ``reference`` (``align_layout``)."""
    return align_layout(layout, reference, also=np.asarray(point, dtype=np.float64)[None])[1][0]
