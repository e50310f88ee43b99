"""Token-to-token maxima: hand-computed small cases, special tokens by mask, word level, causal models."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from core.attention_heads.attention import attention_maxima, top_attended
from core.model.inference import analyze
from tests.test_rollout_norm import hand_analysis

#                [CLS]  a     b     c    [SEP]
HEAD_0 = [
    [1.0, 0.0, 0.0, 0.0, 0.0],
    [0.1, 0.2, 0.3, 0.0, 0.4],
    [0.0, 0.5, 0.1, 0.1, 0.3],
    [0.6, 0.0, 0.1, 0.3, 0.0],
    [0.0, 0.0, 0.0, 0.0, 1.0],
]
HEAD_1 = [
    [1.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.6, 0.4],
    [0.0, 0.1, 0.0, 0.45, 0.45],
    [0.0, 0.0, 0.9, 0.1, 0.0],
    [0.0, 0.0, 0.0, 0.0, 1.0],
]


@pytest.fixture
def small():
    return hand_analysis([[HEAD_0, HEAD_1]], ["[CLS]", "a", "b", "c", "[SEP]"], [True, False, False, False, True])


def _rounded(rows):
    return [(q, t, round(w, 6)) for q, t, w in rows]


def test_max_over_heads_then_argmax_skipping_special(small):
    # max over heads: a → [.1 .2 .3 .6 .4], b → [0 .5 .1 .45 .45], c → [.6 0 .9 .3 0]
    assert _rounded(top_attended(small, 0)) == [("a", "c", 0.6), ("b", "a", 0.5), ("c", "b", 0.9)]


def test_including_special_tokens(small):
    assert _rounded(top_attended(small, 0, skip_special=False)) == [
        ("[CLS]", "[CLS]", 1.0),
        ("a", "c", 0.6),
        ("b", "a", 0.5),
        ("c", "b", 0.9),
        ("[SEP]", "[SEP]", 1.0),
    ]


def test_one_head(small):
    # head 0 alone: a's largest weight is on [SEP] (.4), c's on [CLS] (.6); skipped, they fall to b and c
    assert _rounded(top_attended(small, 0, head=0)) == [("a", "b", 0.3), ("b", "a", 0.5), ("c", "c", 0.3)]
    assert _rounded(top_attended(small, 0, head=0, skip_special=False)) == [
        ("[CLS]", "[CLS]", 1.0),
        ("a", "[SEP]", 0.4),
        ("b", "a", 0.5),
        ("c", "[CLS]", 0.6),
        ("[SEP]", "[SEP]", 1.0),
    ]


def test_mean_over_heads_and_distances(small):
    # mean: a → [.05 .1 .15 .3 .4], b → [0 .3 .05 .275 .375], c → [.3 0 .5 .2 0]
    found = attention_maxima(small, heads="mean")
    assert found.queries.tolist() == [1, 2, 3]
    assert found.targets.tolist() == [[3, 1, 2]]
    np.testing.assert_allclose(found.weights, [[0.3, 0.3, 0.5]])
    assert found.distances.tolist() == [[2, -1, -1]]
    with_special = attention_maxima(small, heads="mean", skip_special=False)
    assert with_special.targets.tolist() == [[0, 4, 4, 2, 4]]


def test_special_tokens_are_found_by_mask_not_position():
    # GPT-2 style: no special token at either end, one <|endoftext|> in the middle
    rows = [[1, 0, 0, 0], [0.4, 0.6, 0, 0], [0.1, 0.2, 0.7, 0], [0.1, 0.2, 0.6, 0.1]]
    a = hand_analysis([[rows]], ["x", "y", "<|endoftext|>", "z"], [False, False, True, False])
    assert _rounded(top_attended(a, 0)) == [("x", "x", 1.0), ("y", "y", 0.6), ("z", "y", 0.2)]


def test_word_level_merges_before_the_argmax(tiny_bert):
    a = analyze(tiny_bert, "hikes a")
    assert a.tokens == ["[CLS]", "hike", "##s", "a", "[SEP]"]
    rows = [
        [1.0, 0.0, 0.0, 0.0, 0.0],
        [0.0, 0.1, 0.2, 0.3, 0.4],
        [0.0, 0.3, 0.3, 0.2, 0.2],
        [0.1, 0.3, 0.3, 0.3, 0.0],
        [0.0, 0.0, 0.0, 0.0, 1.0],
    ]
    layers, heads = a.attentions.shape[:2]
    hand = replace(a, attentions=np.broadcast_to(np.array(rows, dtype=np.float32), (layers, heads, 5, 5)).copy())
    # token level: hike → a (.3); word level: hikes = mean of [0 .3 .3 .4], [0 .6 .2 .2] → hikes (.45)
    assert _rounded(top_attended(hand, 0)) == [("hike", "a", 0.3), ("##s", "hike", 0.3), ("a", "hike", 0.3)]
    words = attention_maxima(hand, words=True)
    assert [words.labels[q] for q in words.queries] == ["hikes", "a"]
    assert [words.labels[t] for t in words.targets[0]] == ["hikes", "hikes"]
    np.testing.assert_allclose(words.weights[0], [0.45, 0.6], rtol=1e-6)


def test_decoder_targets_are_never_in_the_future(tiny_gpt2):
    a = analyze(tiny_gpt2, "The cat sat on the mat. It was happy to be home.")
    for heads in ("max", "mean", 2):
        assert (attention_maxima(a, heads=heads).distances <= 0).all()


def test_one_row_per_non_special_query_on_a_real_model(tiny_model):
    a = analyze(tiny_model, "I will hike along the bank of a river.")
    for layer in range(a.num_layers):
        rows = top_attended(a, layer)
        assert len(rows) == int((~a.special_mask).sum())
        for _, _, weight in rows:
            assert 0.0 < weight <= 1.0


def test_bad_layer_or_head_is_rejected(small):
    with pytest.raises(ValueError):
        top_attended(small, 1)
    with pytest.raises(ValueError):
        top_attended(small, 0, head=2)


@pytest.mark.app
def test_page_table_has_one_row_per_token_and_a_column_per_layer(tiny_bert_dir):
    from tests.test_app import open_app, page_errors

    at = open_app({"model": tiny_bert_dir, "text": "the bank of a river"}, page="app_pages/maxima.py")
    assert not page_errors(at)
    table = at.dataframe[1].value
    assert list(table["token"]) == ["the", "bank", "of", "a", "river"]
    assert list(table.columns[2:]) == ["layer 0", "layer 1"]
    at.toggle(key="maxima.special").set_value(True).run()
    assert list(at.dataframe[1].value["token"]) == ["[CLS]", "the", "bank", "of", "a", "river", "[SEP]"]


@pytest.mark.app
def test_unsupported_architecture_is_an_info_and_the_page_keeps_working(tiny_bert_dir, monkeypatch):
    import core.attention_heads.attention
    from core.model.recording import UnsupportedArchitecture
    from tests.test_app import open_app, page_errors

    def refuse(model):
        raise UnsupportedArchitecture("Recomputing a head step by step is not available for these models.")

    monkeypatch.setattr(core.attention_heads.attention, "check_supported", refuse)
    at = open_app({"model": tiny_bert_dir, "text": "the bank of a river again"}, page="app_pages/maxima.py")
    assert not page_errors(at)
    assert any("Norm-weighted attention is not available" in i.value for i in at.info)
    assert at.radio(key="maxima.source").options == ["raw attention", "rollout"]
    assert len(at.dataframe) == 2


def test_a_token_label_hundreds_of_characters_long_is_cut_on_axes_and_cells_not_in_hovers(tiny_bert):
    from viz.maxima import MAX_LABEL_CHARS, attention_panels, maxima_grid

    analysis = analyze(tiny_bert, "🙂" * 400)
    maxima = attention_maxima(analysis, skip_special=False)
    long = max(maxima.labels, key=len)
    assert len(long) >= 400
    grid = maxima_grid(maxima, title="t")
    assert max(len(t) for t in grid.layout.xaxis.ticktext) <= MAX_LABEL_CHARS
    assert max(len(t) for row in grid.data[0].text for t in row) <= MAX_LABEL_CHARS
    assert any(long in str(c) for c in np.asarray(grid.data[0].customdata).ravel())
    panels = attention_panels([("a", analysis.attentions[0, 0])], maxima.labels)
    assert max(len(t) for t in panels.layout.xaxis.ticktext) <= MAX_LABEL_CHARS


@pytest.mark.app
def test_word_level_greyed_for_norm_weighted_says_it_is_not_applied(tiny_bert_dir):
    """Issue 28: the toggle stayed on, greyed, and nothing said that the grid shows tokens."""
    from tests.test_app import open_app, page_errors

    at = open_app({"model": tiny_bert_dir, "source": "norm-weighted", "words": "true"}, page="app_pages/maxima.py")
    assert not page_errors(at), page_errors(at)
    assert at.toggle(key="maxima.words").disabled
    assert any("not applied to norm-weighted" in c.value for c in at.caption), [c.value for c in at.caption]
    plain = open_app({"model": tiny_bert_dir, "words": "true"}, page="app_pages/maxima.py")
    assert not any("not applied" in c.value for c in plain.caption)


@pytest.mark.app
def test_export_names_never_end_in_head(tiny_bert_dir):
    """Issue 28: with the heads reduced (no one head) the export names ended in "-head"."""
    import json

    from tests.test_app import open_app

    for query in ({}, {"heads": "one head", "head": "1"}):
        at = open_app({"model": tiny_bert_dir} | query, page="app_pages/maxima.py")
        names = [json.loads(c.proto.config)["toImageButtonOptions"]["filename"] for c in at.get("plotly_chart")]
        assert names and not [n for n in names if n.endswith("-head")], names
        if query:
            assert names[0].endswith("-head-1") and names[1].endswith("-head-1"), names
        else:
            assert names[0].endswith("-heads-max") and names[1].endswith("-heads-mean"), names
