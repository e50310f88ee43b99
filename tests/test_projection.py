"""2-D projections: shapes, determinism, what each method keeps, and messages for too few points."""

from __future__ import annotations

import numpy as np
import pytest

from core.inference import AnalysisError
from core.projection import ProjectionError, project


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


@pytest.mark.parametrize("method", ["pca", "umap", "tsne"])
def test_projection_is_deterministic_and_keeps_clear_clusters(method):
    vectors, labels = _two_blobs()
    first, second = project(vectors, method), project(vectors, method)
    assert first.shape == (len(vectors), 2)
    np.testing.assert_array_equal(first, second)
    assert _nearest_neighbour_agrees(first, labels)


@pytest.mark.parametrize("method", ["umap", "tsne"])
def test_too_few_points_for_a_neighbourhood_method_is_a_sentence(method):
    with pytest.raises(ProjectionError, match="PCA"):
        project(np.ones((3, 4)), method)
    assert issubclass(ProjectionError, AnalysisError)  # shown by the page's error boundary as a sentence


def test_one_point_cannot_be_projected_and_unknown_methods_are_refused():
    with pytest.raises(ProjectionError):
        project(np.ones((1, 4)), "pca")
    with pytest.raises(ValueError, match="unknown"):
        project(np.ones((5, 4)), "mds")
