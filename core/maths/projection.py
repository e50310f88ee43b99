"""2-D projections of embedding vectors (PCA, UMAP, t-SNE), deterministic for a fixed random state.

The pictures are for looking, not measuring: distances between UMAP or t-SNE clusters mean
little. Measure separation in the original space instead (``core.representations.senses.separation``).
UMAP and t-SNE use the cosine distance; PCA works on the vectors as they are (centred).

Identical points are projected once and share one position (``distinct_points``): the
libraries otherwise draw copies of one vector far apart, and scikit-learn's t-SNE can even
crash the interpreter on them (a 0/0 in its PCA start, then a segmentation fault). t-SNE also
runs in a separate process, so that whatever its native code does, the server survives.
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.errors import AnalysisError

METHODS = ("umap", "pca", "tsne")
METHOD_NAMES = {"umap": "UMAP", "pca": "PCA", "tsne": "t-SNE"}
# UMAP and t-SNE need a neighbourhood; below this many distinct points they say nothing useful.
MIN_POINTS_NONLINEAR = 5
UMAP_NEIGHBOURS = 15
TSNE_PERPLEXITY = 30.0
# Rows closer than this (relative to the largest coordinate; unit vectors for the cosine methods)
# count as the same point: float noise, not a difference a projection could show.
IDENTICAL_TOLERANCE = 1e-5
ISOLATED_TIMEOUT_S = 600.0

log = logging.getLogger(__name__)


class ProjectionError(AnalysisError):
    """The points cannot be projected with the chosen method. The message is meant for the user."""


@dataclass(frozen=True)
class DistinctPoints:
    """Groups of identical rows of an ``[N, hidden]`` array, as the chosen method sees them.

    ``first``: int ``[M]``, the first row of each group; ``group``: int ``[N]``, the group of
    each row; ``sizes``: int ``[M]``, how many rows each group has. For UMAP and t-SNE (cosine
    distance) rows pointing the same way are identical; for PCA rows must be equal.
    """

    first: np.ndarray
    group: np.ndarray
    sizes: np.ndarray

    @property
    def count(self) -> int:
        """M, the number of distinct points."""
        return len(self.first)

    @property
    def copies(self) -> np.ndarray:
        """int ``[N]``: for each row, how many rows (itself included) share its position."""
        return self.sizes[self.group]


def distinct_points(vectors: np.ndarray, method: str = "pca") -> DistinctPoints:
    """Group the identical rows of ``vectors`` ``[N, hidden]`` (see ``DistinctPoints``)."""
    x = np.asarray(vectors, dtype=np.float64)
    if method != "pca":  # cosine distance: only the direction counts
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        x = np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
    scale = float(np.abs(x).max()) if x.size else 0.0
    if not np.isfinite(scale):
        raise ProjectionError("Some of these vectors contain infinite or undefined numbers, so they cannot be drawn.")
    keys = np.round(x / (IDENTICAL_TOLERANCE * max(scale, 1e-30))).astype(np.int64) if scale > 0 else np.zeros_like(x, np.int64)
    _, first, group, sizes = np.unique(keys, axis=0, return_index=True, return_inverse=True, return_counts=True)
    order = np.argsort(first)  # groups in the order their first row appears
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return DistinctPoints(first=first[order], group=rank[np.ravel(group)], sizes=sizes[order])


def identical_points_note(points: DistinctPoints) -> str | None:
    """A sentence for the user when some points are identical, else None."""
    n = len(points.group)
    if points.count == n:
        return None
    shared = int((points.copies > 1).sum())
    where = "all" if points.count == 1 else f"{shared} of the {n}"
    return (
        f"Only {points.count} of these {n} vectors are distinct: {where} occurrences have exactly the same vector as "
        "another one, so they are drawn as one point (hover shows how many). This happens when the model sees the same "
        "thing at each occurrence: the same sentence twice, the embedding layer (same token, same position), or a "
        "decoder whose sentences share every word up to this one."
    )


def _checked_points(vectors: np.ndarray, method: str):
    """``(x, distinct_points(x, method))`` for ``vectors`` ``[N, hidden]``, N >= 2, as float32."""
    x = np.asarray(vectors, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"vectors must be [N, hidden], got shape {x.shape}")
    if x.shape[0] < 2:
        raise ProjectionError("At least two occurrences of the word are needed to draw a projection.")
    return x, distinct_points(x, method)


def project(vectors: np.ndarray, method: str = "umap", random_state: int = 0) -> np.ndarray:
    """Project ``vectors`` ``[N, hidden]`` to float32 ``[N, 2]`` with ``method`` in ``METHODS``.

    The same input and ``random_state`` always give the same output. Identical rows (see
    ``distinct_points``) are projected once and get the same position; when every row is the
    same, all sit at (0, 0). PCA with a single available component fills the second coordinate
    with 0. UMAP and t-SNE need ``MIN_POINTS_NONLINEAR`` distinct points.
    """
    if method not in METHODS:
        raise ValueError(f"unknown projection method {method!r}; choose one of {METHODS}")
    x, points = _checked_points(vectors, method)
    n = x.shape[0]
    if points.count == 1:
        return np.zeros((n, 2), dtype=np.float32)
    distinct = x[points.first]
    if method == "pca":
        return _pca(distinct)[points.group]
    if points.count < MIN_POINTS_NONLINEAR:
        found = f"there are {n}" if points.count == n else f"there are {n}, but only {points.count} distinct"
        raise ProjectionError(
            f"{METHOD_NAMES[method]} needs at least {MIN_POINTS_NONLINEAR} different occurrence vectors of the word "
            f"({found}); choose PCA or add sentences."
        )
    coords = _umap(distinct, random_state) if method == "umap" else _tsne_isolated(distinct, random_state)
    return coords[points.group]


def _pca(x: np.ndarray) -> np.ndarray:
    from sklearn.decomposition import PCA  # noqa: PLC0415 - scikit-learn's import cost, only when asked

    components = min(2, x.shape[0] - 1, x.shape[1])
    coords = PCA(n_components=components, svd_solver="full").fit_transform(x)
    out = np.zeros((x.shape[0], 2), dtype=np.float32)
    out[:, :components] = coords
    return out


def _umap_reducer(n: int, random_state: int):
    import umap  # noqa: PLC0415 - UMAP and numba take seconds to import: only when asked

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


def tsne_points(x: np.ndarray, random_state: int) -> np.ndarray:
    from sklearn.manifold import TSNE  # noqa: PLC0415 - scikit-learn's import cost, only when asked

    perplexity = min(TSNE_PERPLEXITY, (x.shape[0] - 1) / 3)
    tsne = TSNE(n_components=2, metric="cosine", perplexity=perplexity, init="pca", random_state=random_state)
    return np.asarray(tsne.fit_transform(x), dtype=np.float32)


def _tsne_isolated(x: np.ndarray, random_state: int) -> np.ndarray:
    return run_isolated("core.maths.projection:tsne_points", x, random_state, what="t-SNE")


_CHILD = """
import importlib, io, sys
import numpy as np
module, name = sys.argv[1].split(":")
x = np.load(io.BytesIO(sys.stdin.buffer.read()), allow_pickle=False)
result = getattr(importlib.import_module(module), name)(x, *map(int, sys.argv[2:]))
out = io.BytesIO()
np.save(out, np.asarray(result, dtype=np.float32), allow_pickle=False)
sys.stdout.buffer.write(out.getvalue())
"""


def run_isolated(target: str, x: np.ndarray, *args: int, what: str, timeout_s: float = ISOLATED_TIMEOUT_S) -> np.ndarray:
    """``module:function`` called as ``function(x, *args)`` in a separate Python process, so that a crash
    in native code (scikit-learn's t-SNE) ends that process, not the server.

    A fresh interpreter (not ``multiprocessing``: it would re-run the server's main script) reads
    ``x`` and writes the float32 result as ``.npy`` bytes through pipes. Raises ``ProjectionError``
    when the process dies, fails or takes longer than ``timeout_s``.
    """
    data = io.BytesIO()
    np.save(data, np.ascontiguousarray(x), allow_pickle=False)
    root = str(Path(__file__).resolve().parent.parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    failed = ProjectionError(f"{what} stopped with an internal error on these points. Choose PCA or UMAP to draw them.")
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, target, *map(str, args)],
            input=data.getvalue(), capture_output=True, timeout=timeout_s, cwd=root, env=env, check=False,
        )
    except subprocess.TimeoutExpired as err:
        raise ProjectionError(f"{what} took longer than {timeout_s:.0f} s on these points. Choose PCA or UMAP.") from err
    if done.returncode != 0:
        log.warning("%s failed in its helper process (exit %s): %s", what, done.returncode, done.stderr[-2000:].decode(errors="replace"))
        raise failed
    try:
        return np.load(io.BytesIO(done.stdout), allow_pickle=False)
    except ValueError as err:
        raise failed from err


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
    x, points = _checked_points(vectors, method)  # fitted once per distinct vector, as ``project`` does
    n = x.shape[0]
    needed = 2 if method == "pca" else MIN_POINTS_NONLINEAR
    if points.count < needed:
        raise ProjectionError(
            f"{METHOD_NAMES[method]} needs at least {needed} different occurrence vectors of the word to place a new "
            f"one (there are {points.count}); choose PCA or add sentences."
        )
    distinct = x[points.first]
    if method == "pca":
        from sklearn.decomposition import PCA  # noqa: PLC0415 - scikit-learn's import cost, only when asked

        estimator = PCA(n_components=min(2, points.count - 1, x.shape[1]), svd_solver="full")
        fitted = estimator.fit_transform(distinct)
    else:
        estimator = _umap_reducer(points.count, random_state)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = estimator.fit_transform(distinct)
    coords = np.zeros((n, 2), dtype=np.float32)
    coords[:, : fitted.shape[1]] = fitted[points.group]
    coords.setflags(write=False)
    return FittedProjection(method, coords, estimator)
