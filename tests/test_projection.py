"""2-D projections: shapes, determinism, what each method keeps, and messages for too few points."""

from __future__ import annotations

import numpy as np
import pytest

from core.errors import AnalysisError
from core.maths.projection import ProjectionError, distinct_points, identical_points_note, project, run_isolated

# UMAP and t-SNE fit for seconds each: the full suite runs them, `make test-fast` leaves them out.
SLOW_UMAP = pytest.param("umap", marks=pytest.mark.slow)
SLOW_TSNE = pytest.param("tsne", marks=pytest.mark.slow)


def _two_blobs(n: int = 20, dim: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """Two tight clusters around orthogonal directions (cosine distance about 1 between them)."""
    rng = np.random.default_rng(3)
    centres = np.eye(dim)[:2] * 10
    labels = np.repeat([0, 1], n // 2)
    return (centres[labels] + rng.normal(scale=0.3, size=(n, dim))).astype(np.float32), labels


def _nearest_neighbour_agrees(coords: np.ndarray, labels: np.ndarray) -> bool:
    distances = np.linalg.norm(coords[:, None] - coords[None], axis=-1)
    np.fill_diagonal(distances, np.inf)
    return bool((labels[distances.argmin(axis=1)] == labels).all())


def test_pca_of_points_on_a_line_is_the_line():
    t = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    direction = np.array([3.0, 0.0, 4.0])  # length 5
    coords = project(t[:, None] * direction, "pca")
    assert coords.shape == (5, 2) and coords.dtype == np.float32
    np.testing.assert_allclose(np.abs(coords[:, 0]), 5 * np.abs(t), atol=1e-4)
    np.testing.assert_allclose(coords[:, 1], 0.0, atol=1e-4)


def test_pca_of_two_points_has_a_zero_second_axis():
    coords = project(np.array([[0.0, 0.0, 0.0], [0.0, 2.0, 0.0]]), "pca")
    np.testing.assert_allclose(np.abs(coords[:, 0]), [1.0, 1.0], atol=1e-5)
    np.testing.assert_allclose(coords[:, 1], [0.0, 0.0])


@pytest.mark.parametrize("method", ["pca", SLOW_UMAP, SLOW_TSNE])
def test_projection_is_deterministic_and_keeps_clear_clusters(method):
    vectors, labels = _two_blobs()
    first, second = project(vectors, method), project(vectors, method)
    assert first.shape == (len(vectors), 2)
    np.testing.assert_array_equal(first, second)
    assert _nearest_neighbour_agrees(first, labels)


@pytest.mark.parametrize("method", ["umap", "tsne"])
def test_too_few_points_for_a_neighbourhood_method_is_a_sentence(method):
    with pytest.raises(ProjectionError, match="PCA"):
        project(np.eye(3, 4), method)
    assert issubclass(ProjectionError, AnalysisError)  # shown by the page's error boundary as a sentence


def test_one_point_cannot_be_projected_and_unknown_methods_are_refused():
    with pytest.raises(ProjectionError):
        project(np.ones((1, 4)), "pca")
    with pytest.raises(ValueError, match="unknown"):
        project(np.ones((5, 4)), "mds")


# --- Degenerate inputs: identical points (issue 18, item 1) ---

@pytest.mark.parametrize("method", ["pca", "umap", "tsne"])
def test_identical_points_do_not_crash_and_sit_at_one_place(method):
    # Before the fix, t-SNE on these five identical rows ended the process with a segmentation fault.
    coords = project(np.ones((5, 8), np.float32), method)
    np.testing.assert_array_equal(coords, np.zeros((5, 2), np.float32))


@pytest.mark.parametrize("method", [SLOW_UMAP, SLOW_TSNE])
def test_copies_of_a_vector_share_one_position(method):
    vectors, labels = _two_blobs()
    # Each vector appears twice; for the cosine methods, a copy scaled by 3 points the same way.
    doubled = np.vstack([vectors, 3 * vectors])
    coords = project(doubled, method)
    np.testing.assert_array_equal(coords[: len(vectors)], coords[len(vectors):])
    assert len(np.unique(coords, axis=0)) == len(vectors)


def test_pca_copies_share_one_position_and_distinct_points_are_counted():
    rows = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 1.0], [0.0, 1.0, 0.0], [5.0, 5.0, 5.0]], np.float32)
    coords = project(rows, "pca")
    np.testing.assert_array_equal(coords[0], coords[2])
    points = distinct_points(rows, "pca")
    assert points.count == 3 and points.copies.tolist() == [2, 1, 2, 1]
    assert "Only 3 of these 4 vectors are distinct" in identical_points_note(points)
    assert identical_points_note(distinct_points(np.eye(3), "pca")) is None
    # a scaled copy is a different point for PCA, the same one for the cosine methods
    assert distinct_points(np.vstack([rows[:1], 2 * rows[:1]]), "pca").count == 2
    assert distinct_points(np.vstack([rows[:1], 2 * rows[:1]]), "tsne").count == 1


def test_too_few_distinct_points_for_a_neighbourhood_method_is_a_sentence():
    rows = np.vstack([np.eye(4)] * 3).astype(np.float32)  # 12 occurrences, 4 distinct
    with pytest.raises(ProjectionError, match="only 4 distinct"):
        project(rows, "tsne")


def crash(x):
    """Stands in for a native library that dies with a segmentation fault."""
    import faulthandler

    faulthandler._sigsegv()


@pytest.mark.slow
def test_a_crash_in_native_code_ends_only_the_helper_process():
    with pytest.raises(ProjectionError, match="internal error"):
        run_isolated("tests.test_projection:crash", np.ones((5, 2), np.float32), what="t-SNE")


@pytest.mark.slow
def test_the_helper_process_returns_the_same_as_in_process():
    vectors, _ = _two_blobs()
    from core.maths.projection import tsne_points

    np.testing.assert_array_equal(run_isolated("core.maths.projection:tsne_points", vectors, 0, what="t-SNE"), tsne_points(vectors, 0))


def test_non_finite_vectors_are_a_sentence():
    rows = np.ones((5, 3), np.float32)
    rows[2, 1] = np.nan
    with pytest.raises(ProjectionError, match="undefined"):
        project(rows, "pca")


def test_the_helper_process_imports_neither_torch_nor_transformers():
    """The t-SNE helper imports ``core.maths.projection`` afresh for every projection; through ``core.model.inference`` that
    pulled in torch and transformers, about 3 s of a 5 s t-SNE on 40 points."""
    import subprocess
    import sys

    from tests.pages_registry import ROOT

    loaded = subprocess.run(
        [sys.executable, "-c",
         "import sys, core.maths.projection; print(sorted(m for m in ('torch', 'transformers', 'streamlit') if m in sys.modules))"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert loaded == "[]", loaded


def test_the_error_is_one_class_wherever_it_is_imported_from():
    from core.errors import AnalysisError as from_errors

    assert from_errors is AnalysisError and issubclass(ProjectionError, AnalysisError)
