"""Token labels and cosine similarity."""

from __future__ import annotations

import numpy as np

from core.maths.similarity import cosine, token_static_similarity
from core.model.inference import analyze
from core.model.tokens import token_labels, unique_labels
from viz.common import file_stem, plotly_safe, token_axis


def test_labels_come_from_the_text_spans(tiny_bert, tiny_gpt2):
    bert = token_labels(analyze(tiny_bert, "Zebra bank"))
    assert bert[0] == "[CLS]" and bert[-1] == "[SEP]"
    assert bert[1] == "Z" and bert[2].startswith("##")  # z ##e ##b ... keeps the case the user typed
    gpt = token_labels(analyze(tiny_gpt2, "the bank"))
    assert "·bank" in gpt and not any(label.startswith("Ġ") for label in gpt)  # its space, shown


def test_unique_labels_mark_repeats_only():
    assert unique_labels(["the", "cat", "the"]) == ["the (0)", "cat", "the (2)"]


def test_cosine_known_values():
    a = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    b = np.array([[0.0, 1.0], [2.0, 2.0], [1.0, 0.0]])
    np.testing.assert_allclose(cosine(a, b), [0.0, 1.0, 0.0])


def test_static_similarity_starts_at_one(tiny_bert):
    sim = token_static_similarity(analyze(tiny_bert, "the bank of a river"))
    np.testing.assert_allclose(sim[0], 1.0, atol=1e-6)
    assert sim.shape[0] == 3 and np.all(sim[1:] < 1.0)


def test_plotly_text_is_escaped():
    assert plotly_safe("<img src=x onerror=alert(1)>") == "&lt;img src=x onerror=alert(1)&gt;"
    axis = token_axis(["<b>", "a"])
    assert axis["ticktext"] == ["&lt;b&gt;", "a"] and axis["tickvals"] == [0, 1]


def test_token_axis_thins_long_inputs():
    axis = token_axis([str(i) for i in range(1000)], max_labels=100)
    assert len(axis["tickvals"]) <= 100 and axis["tickvals"][0] == 0


def test_file_stem_is_safe():
    assert file_stem("sentence-transformers/all-MiniLM", "layer", 3) == "sentence-transformers_all-MiniLM-layer-3"
    assert "/" not in file_stem("../../etc/passwd") and file_stem("") == "figure"
