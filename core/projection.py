"""2-D projections of embedding vectors (PCA, UMAP, t-SNE), deterministic for a fixed random state.

The pictures are for looking, not measuring: distances between UMAP or t-SNE clusters mean
little. Measure separation in the original space instead (``core.senses.separation``).
UMAP and t-SNE use the cosine distance; PCA works on the vectors as they are (centred).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from core.inference import AnalysisError

METHODS = ("umap", "pca", "tsne")
METHOD_NAMES = {"umap": "UMAP", "pca": "PCA", "tsne": "t-SNE"}
# UMAP and t-SNE need a neighbourhood; below this many points they say nothing useful.
MIN_POINTS_NONLINEAR = 5
UMAP_NEIGHBOURS = 15
TSNE_PERPLEXITY = 30.0


class ProjectionError(AnalysisError):
    """The points cannot be projected with the chosen method. The message is meant for the user."""


def project(vectors: np.ndarray, method: str = "umap", random_state: int = 0) -> np.ndarray:
    """Project ``vectors`` ``[N, hidden]`` to float32 ``[N, 2]`` with ``method`` in ``METHODS``.

    The same input and ``random_state`` always give the same output. PCA with a single
    available component (two points) fills the second coordinate with 0.
    """
    if method not in METHODS:
        raise ValueError(f"unknown projection method {method!r}; choose one of {METHODS}")
    x = np.asarray(vectors, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"vectors must be [N, hidden], got shape {x.shape}")
    n = x.shape[0]
    if n < 2:
        raise ProjectionError("At least two occurrences of the word are needed to draw a projection.")
    if method == "pca":
        return _pca(x)
    if n < MIN_POINTS_NONLINEAR:
        raise ProjectionError(
            f"{METHOD_NAMES[method]} needs at least {MIN_POINTS_NONLINEAR} occurrences of the word "
            f"(there are {n}); choose PCA or add sentences."
        )
    return _umap(x, random_state) if method == "umap" else _tsne(x, random_state)


def _pca(x: np.ndarray) -> np.ndarray:
    from sklearn.decomposition import PCA

    components = min(2, x.shape[0] - 1, x.shape[1])
    coords = PCA(n_components=components, svd_solver="full").fit_transform(x)
    out = np.zeros((x.shape[0], 2), dtype=np.float32)
    out[:, :components] = coords
    return out


def _umap_reducer(n: int, random_state: int):
    import umap

    # A fixed random_state makes umap-learn run single-threaded (it would force n_jobs=1 with a
    # warning); saying n_jobs=1 here keeps the result reproducible without the warning.
    return umap.UMAP(
        n_components=2,
        n_neighbors=min(UMAP_NEIGHBOURS, n - 1),
        metric="cosine",
        random_state=random_state,
        n_jobs=1,
    )


def _umap(x: np.ndarray, random_state: int) -> np.ndarray:
    reducer = _umap_reducer(x.shape[0], random_state)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # spectral-init fallbacks on tiny inputs are expected
        return np.asarray(reducer.fit_transform(x), dtype=np.float32)


def _tsne(x: np.ndarray, random_state: int) -> np.ndarray:
    from sklearn.manifold import TSNE

    perplexity = min(TSNE_PERPLEXITY, (x.shape[0] - 1) / 3)
    tsne = TSNE(n_components=2, metric="cosine", perplexity=perplexity, init="pca", random_state=random_state)
    return np.asarray(tsne.fit_transform(x), dtype=np.float32)


def warm_up_umap() -> None:
    """Run UMAP once on a tiny random input so numba compiles it (about 10 s the first time in a process)."""
    rng = np.random.default_rng(0)
    project(rng.standard_normal((40, 8)).astype(np.float32), "umap")


# Methods whose fitted map can place new points (t-SNE has no transform: it would need a refit).
PLACEABLE = ("pca", "umap")


@dataclass(frozen=True, eq=False)
class FittedProjection:
    """A 2-D map fitted once: ``coords`` float32 ``[N, 2]`` of the fitted points, and
    ``transform(vectors)`` placing new vectors ``[M, hidden]`` into the same map (no refit)."""

    method: str
    coords: np.ndarray
    estimator: object

    def transform(self, vectors: np.ndarray) -> np.ndarray:
        """Float32 ``[M, 2]``: where the fitted map puts ``vectors`` ``[M, hidden]``."""
        x = np.asarray(vectors, dtype=np.float32)
        if x.ndim != 2:
            raise ValueError(f"vectors must be [M, hidden], got shape {x.shape}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            placed = np.asarray(self.estimator.transform(x), dtype=np.float32)
        out = np.zeros((x.shape[0], 2), dtype=np.float32)
        out[:, : placed.shape[1]] = placed
        return out


def fit_projection(vectors: np.ndarray, method: str = "umap", random_state: int = 0) -> FittedProjection:
    """Fit a 2-D map of ``vectors`` ``[N, hidden]`` that can place new points, ``method`` in ``PLACEABLE``.

    ``coords`` are the fitted points as ``project`` draws them for the same input and random
    state (the same estimator and settings). t-SNE raises ``ProjectionError``: it cannot place a point
    into an existing map.
    """
    if method not in METHODS:
        raise ValueError(f"unknown projection method {method!r}; choose one of {METHODS}")
    if method not in PLACEABLE:
        raise ProjectionError(
            f"{METHOD_NAMES[method]} cannot place a new point into a map it has drawn; choose UMAP or PCA to see it."
        )
    x = np.asarray(vectors, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"vectors must be [N, hidden], got shape {x.shape}")
    n = x.shape[0]
    if n < 2 or (method == "umap" and n < MIN_POINTS_NONLINEAR):
        needed = 2 if method == "pca" else MIN_POINTS_NONLINEAR
        raise ProjectionError(f"{METHOD_NAMES[method]} needs at least {needed} occurrences of the word (there are {n}).")
    if method == "pca":
        from sklearn.decomposition import PCA

        estimator = PCA(n_components=min(2, n - 1, x.shape[1]), svd_solver="full")
        fitted = estimator.fit_transform(x)
    else:
        estimator = _umap_reducer(n, random_state)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = estimator.fit_transform(x)
    coords = np.zeros((n, 2), dtype=np.float32)
    coords[:, : fitted.shape[1]] = fitted
    coords.setflags(write=False)
    return FittedProjection(method, coords, estimator)
