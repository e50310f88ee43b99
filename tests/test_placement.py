"""Your own sentence on the senses map: placing a new point into a fitted map, and its nearest labelled occurrences."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.maths.projection import ProjectionError, fit_projection, project
from core.representations.placement import first_settled_layer, nearest_occurrences, sense_votes
from viz.senses import OWN_SENTENCE, add_own_sentence, sense_projection_figure


def _blobs(n: int = 20, dim: int = 16, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = np.eye(dim)[:2] * 10
    labels = np.repeat([0, 1], n // 2)
    return (centres[labels] + rng.normal(scale=0.3, size=(n, dim))).astype(np.float32), labels


# --- the fitted map ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["pca", pytest.param("umap", marks=pytest.mark.slow)])
def test_fitted_map_is_the_map_project_draws(method):
    x, _ = _blobs()
    fitted = fit_projection(x, method, random_state=0)
    np.testing.assert_array_equal(fitted.coords, project(x, method, random_state=0))
    assert fitted.coords.shape == (20, 2) and fitted.coords.dtype == np.float32


def test_pca_transform_places_a_fitted_point_where_it_was_drawn():
    x, _ = _blobs()
    fitted = fit_projection(x, "pca")
    np.testing.assert_allclose(fitted.transform(x[:4]), fitted.coords[:4], atol=1e-4)


def test_pca_of_two_points_places_new_points_on_the_line_with_zero_second_axis():
    fitted = fit_projection(np.array([[0.0, 0.0], [2.0, 0.0]]), "pca")
    placed = fitted.transform(np.array([[3.0, 5.0]]))
    assert placed.shape == (1, 2)
    np.testing.assert_allclose(np.abs(placed[0, 0]), 2.0, atol=1e-5)  # 2 from the mean (1, 0), along x
    assert placed[0, 1] == 0.0


@pytest.mark.parametrize("method", ["pca", pytest.param("umap", marks=pytest.mark.slow)])
def test_a_new_point_lands_beside_its_own_cluster_without_moving_the_others(method):
    x, labels = _blobs(n=30)
    fitted = fit_projection(x, method)
    before = fitted.coords.copy()
    rng = np.random.default_rng(11)
    new = (np.eye(16)[1] * 10 + rng.normal(scale=0.3, size=16)).astype(np.float32)[None]  # a fresh cluster-1 point
    xy = fitted.transform(new)[0]
    centre = [fitted.coords[labels == c].mean(axis=0) for c in (0, 1)]
    assert np.linalg.norm(xy - centre[1]) < np.linalg.norm(xy - centre[0])
    np.testing.assert_array_equal(fitted.coords, before)  # no refit


def test_tsne_cannot_place_points_and_says_so():
    x, _ = _blobs()
    with pytest.raises(ProjectionError, match="UMAP or PCA"):
        fit_projection(x, "tsne")


def test_too_few_points_is_a_sentence():
    with pytest.raises(ProjectionError, match="at least 5"):
        fit_projection(np.ones((3, 4)), "umap")
    with pytest.raises(ProjectionError, match="At least two"):
        fit_projection(np.ones((1, 4)), "pca")
    with pytest.raises(ProjectionError, match="at least 2 different"):  # three copies of one vector
        fit_projection(np.ones((3, 4)), "pca")


@pytest.mark.parametrize("method", ["pca", pytest.param("umap", marks=pytest.mark.slow)])
def test_identical_vectors_are_fitted_once_and_share_a_place_as_project_draws_them(method):
    x, _ = _blobs()
    doubled = np.concatenate([x, x[:3]])
    fitted = fit_projection(doubled, method)
    np.testing.assert_array_equal(fitted.coords, project(doubled, method))
    np.testing.assert_array_equal(fitted.coords[-3:], fitted.coords[:3])


# --- nearest labelled occurrences and their vote ----------------------------------------------


def _layered() -> tuple[np.ndarray, list[str], np.ndarray]:
    """Two layers, four occurrences: at layer 0 the query points at the "money" ones, at layer 1 at "river"."""
    river, money, other = np.array([1.0, 0, 0]), np.array([0, 1.0, 0]), np.array([0, 0, 1.0])
    layer0 = np.stack([river, river * 0.9 + other * 0.1, money, other])
    layer1 = layer0.copy()
    vectors = np.stack([layer0, layer1])
    labels = ["river", "river", "money", ""]  # the last one is unlabelled: never a neighbour
    query = np.stack([money * 2 + river * 0.1, river + money * 0.2])
    return vectors, labels, query


def test_nearest_occurrences_ranks_by_cosine_and_skips_unlabelled():
    vectors, labels, query = _layered()
    table = nearest_occurrences(vectors, labels, query, k=2)
    assert list(table.columns) == ["layer", "rank", "occurrence", "label", "cosine"]
    first = table[table["layer"] == 0]
    assert list(first["occurrence"]) == [2, 0] and list(first["label"]) == ["money", "river"]
    expected = float(np.dot(query[0], vectors[0, 2]) / np.linalg.norm(query[0]))
    assert first["cosine"].iloc[0] == pytest.approx(expected)
    assert 3 not in set(table["occurrence"])
    second = table[table["layer"] == 1]
    assert list(second["label"]) == ["river", "river"]


def test_k_larger_than_the_labelled_set_gives_every_labelled_occurrence():
    vectors, labels, query = _layered()
    table = nearest_occurrences(vectors, labels, query, k=10)
    assert (table.groupby("layer").size() == 3).all()


def test_no_labels_no_neighbours():
    vectors, _, query = _layered()
    table = nearest_occurrences(vectors, ["", "", "", ""], query, k=3)
    assert table.empty and sense_votes(table).empty


def test_votes_take_the_majority_and_break_ties_by_similarity():
    neighbours = pd.DataFrame(
        [(0, 1, 0, "money", 0.9), (0, 2, 1, "river", 0.8), (0, 3, 2, "river", 0.7),
         (1, 1, 0, "money", 0.95), (1, 2, 1, "river", 0.5)],
        columns=["layer", "rank", "occurrence", "label", "cosine"],
    )
    votes = sense_votes(neighbours)
    assert list(votes["sense"]) == ["river", "money"]
    assert list(votes["votes"]) == [2, 1] and list(votes["k"]) == [3, 2]
    assert votes["tally"].iloc[0] == "river 2, money 1"
    assert votes["mean_cosine"].iloc[0] == pytest.approx(0.75)


def test_first_settled_layer():
    votes = pd.DataFrame({"layer": range(5), "sense": ["money", "river", "money", "river", "river"]})
    assert first_settled_layer(votes, "river") == 3
    assert first_settled_layer(votes, "money") is None


def test_own_sentence_marker_is_a_separate_labelled_trace():
    fig = sense_projection_figure(np.zeros((2, 2)), ["a", "b"], ["x", "y"], title="t", axis="PCA")
    marked = add_own_sentence(fig, np.array([0.5, -1.0]), "I sat on the <b>bank</b>")
    assert len(fig.data) == 2 and len(marked.data) == 3  # the original figure is left alone
    star = marked.data[-1]
    assert star.name == OWN_SENTENCE and list(star.text) == [OWN_SENTENCE]
    assert (star.x[0], star.y[0]) == (0.5, -1.0) and star.marker.symbol == "star"


# --- the bundled model ------------------------------------------------------------------------


@pytest.mark.integration
def test_held_out_river_sentence_votes_river_at_the_later_layers_and_lands_in_the_same_map(bundled):
    from core.representations.senses import builtin_set, occurrence_embeddings

    sentences, senses = builtin_set("bank")
    occurrences = occurrence_embeddings(bundled, sentences, "bank")
    labels = [senses[i] for i in occurrences.sentence_ids]
    own = occurrence_embeddings(bundled, ["I sat on the bank and fished."], "bank")
    assert "I sat on the bank and fished." not in sentences  # held out
    votes = sense_votes(nearest_occurrences(occurrences.vectors, labels, own.vectors[:, 0]))
    later = votes[votes["layer"] > bundled.num_layers // 2]
    assert (later["sense"] == "river").all(), votes
    assert first_settled_layer(votes, "river") <= bundled.num_layers // 2 + 1
    last = bundled.num_layers
    fitted = fit_projection(occurrences.vectors[last], "pca")
    np.testing.assert_array_equal(fitted.coords, project(occurrences.vectors[last], "pca"))  # the map the page draws
    xy = fitted.transform(own.vectors[last, :1])[0]
    centres = {sense: fitted.coords[np.array(labels) == sense].mean(axis=0) for sense in ("river", "money")}
    assert np.linalg.norm(xy - centres["river"]) < np.linalg.norm(xy - centres["money"])


# --- the senses page (AppTest) ----------------------------------------------------------------


def _senses(query: dict[str, str]):
    from tests.test_app import open_app

    return open_app(query, page="app_pages/senses.py")


def _projection(at) -> dict:
    import json

    return json.loads(at.get("plotly_chart")[0].proto.spec)


def _trace_names(at) -> list[str]:
    assert not at.exception and not at.error, [e.value for e in at.error]
    return [t["name"] for t in _projection(at)["data"]]


@pytest.mark.app
@pytest.mark.parametrize("method", ["PCA", "UMAP"])
def test_senses_page_draws_the_sidebar_sentence_in_the_same_map(tiny_bert_dir, method):
    at = _senses({"model": tiny_bert_dir, "text": "I sat on the bank and fished.", "word": "bank", "method": method, "layer": "1"})
    assert not at.exception and not at.error, [e.value for e in at.error]
    traces = _projection(at)["data"]
    assert [t["name"] for t in traces][-1] == OWN_SENTENCE
    assert sum(len(t["customdata"]) for t in traces[:-1]) == 24  # the built-in set, unchanged
    assert any("Your sentence" in m.value and "the vote is" in m.value for m in at.markdown)
    votes = at.dataframe[-2].value
    assert list(votes["layer"]) == [0, 1, 2] and set(votes["sense"]) <= {"river", "money"}


@pytest.mark.app
def test_tsne_lists_the_neighbours_but_says_it_cannot_place_the_point(tiny_bert_dir):
    at = _senses({"model": tiny_bert_dir, "text": "I sat on the bank and fished.", "word": "bank", "method": "t-SNE"})
    assert OWN_SENTENCE not in _trace_names(at)
    assert any("cannot place a new point" in i.value for i in at.info)
    assert any("the vote is" in m.value for m in at.markdown)


@pytest.mark.app
def test_own_labelled_lines_vote_with_their_own_labels(tiny_bert_dir):
    at = _senses({"model": tiny_bert_dir, "text": "The bank of the river flooded.", "word": "bank", "method": "PCA",
                  "source": "Your sentences"})
    assert _trace_names(at)[-1] == OWN_SENTENCE
    votes = at.dataframe[-2].value
    assert set(votes["sense"]) <= {"river", "money"}


@pytest.mark.app
def test_a_text_without_the_word_gets_a_hint_and_no_marker(tiny_bert_dir):
    at = _senses({"model": tiny_bert_dir, "text": "The cat sat on the mat.", "word": "bank", "method": "PCA"})
    assert OWN_SENTENCE not in _trace_names(at)
    assert any("to see where it lands" in c.value for c in at.caption)


@pytest.mark.app
def test_the_sentence_itself_in_the_set_is_left_out_of_its_neighbours(tiny_bert_dir):
    from core.representations.senses import builtin_set

    in_set = builtin_set("bank")[0][0]  # any sentence of the built-in set
    at = _senses({"model": tiny_bert_dir, "text": in_set, "word": "bank", "method": "PCA"})
    assert not at.exception and not at.error
    assert any("left out of its own neighbours" in m.value for m in at.markdown)
    neighbours = at.dataframe[-1].value
    assert in_set not in set(neighbours["sentence"])
