"""Procrustes alignment of consecutive 2-D layouts."""

from __future__ import annotations

import numpy as np
import pytest

from core.maths.alignment import align_layout


def _rotation(angle: float, reflect: bool = False) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    r = np.array([[c, -s], [s, c]])
    return r @ np.diag([1.0, -1.0]) if reflect else r


@pytest.mark.parametrize("reflect", [False, True])
def test_undoes_rotation_reflection_shift_and_scale(reflect):
    reference = np.random.default_rng(0).normal(size=(30, 2))
    moved = 3.5 * reference @ _rotation(1.1, reflect) + np.array([10.0, -4.0])
    np.testing.assert_allclose(align_layout(moved, reference), reference, atol=1e-9)


def test_keeps_the_shape_of_the_layout():
    rng = np.random.default_rng(1)
    layout, reference = rng.normal(size=(20, 2)), rng.normal(size=(20, 2))
    aligned = align_layout(layout, reference)
    distances = lambda x: np.linalg.norm(x[:, None] - x[None], axis=-1)  # noqa: E731 - a one-line helper, read where it is used
    ratio = distances(aligned)[np.triu_indices(20, 1)] / distances(layout)[np.triu_indices(20, 1)]
    np.testing.assert_allclose(ratio, ratio[0])
    # and it is no worse a match than the layout as it was
    assert np.linalg.norm(aligned - reference) <= np.linalg.norm(layout - reference)


def test_degenerate_layouts_do_not_fail():
    same = np.zeros((5, 2))
    out = align_layout(same, np.ones((5, 2)))
    assert np.isfinite(out).all()
    assert align_layout(np.ones((1, 2)), np.zeros((1, 2))).shape == (1, 2)
    with pytest.raises(ValueError):
        align_layout(np.zeros((3, 2)), np.zeros((4, 2)))
