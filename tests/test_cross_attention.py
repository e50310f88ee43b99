"""Encoder-decoder views: cross-attention options, soft alignment, statistics, non-square figures, BertViz."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from core.attention_heads.cross_attention import cross_alignment, cross_attention_view, cross_head_statistics, pair_attention_view
from core.model.seq2seq import PairAnalysis, analyze_pair
from viz import attention as va
from viz import attention_tables as vt
from viz import bertviz_offline as bv
from viz.cross_attention import alignment_figure, alignment_grid

SOURCE = "I will hike along the bank of a river."
TARGET = "the cat sat on the mat"
ATTACK = "</script><img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def pair(tiny_seq2seq) -> PairAnalysis:
    return analyze_pair(tiny_seq2seq, SOURCE, TARGET)


def test_cross_view_shows_target_rows_and_source_columns(pair):
    view = cross_attention_view(pair)
    assert view.matrices.shape == pair.cross_attentions.shape
    np.testing.assert_array_equal(view.matrices, pair.cross_attentions)
    assert len(view.labels) == pair.target.num_tokens and len(view.key_labels) == pair.source.num_tokens
    assert not view.causal


@pytest.mark.parametrize("special", ["hide", "renormalise"])
def test_cross_view_drops_special_rows_and_columns_by_each_tokenizer(pair, special):
    view = cross_attention_view(pair, special=special)
    keep_rows, keep_cols = ~pair.target.special_mask, ~pair.source.special_mask
    assert view.matrices.shape[2:] == (keep_rows.sum(), keep_cols.sum())
    expected = pair.cross_attentions[:, :, keep_rows][..., keep_cols]
    if special == "renormalise":
        expected = expected / expected.sum(-1, keepdims=True)
        np.testing.assert_allclose(view.matrices.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(view.matrices, expected, atol=1e-6)


def test_cross_view_word_level_sums_keys_and_averages_queries(pair):
    view = cross_attention_view(pair, words=True)
    np.testing.assert_allclose(view.matrices.sum(-1), 1.0, atol=1e-5)  # summing key pieces keeps rows distributions
    for i, rows in enumerate(view.positions):
        for j, cols in enumerate(view.key_positions):
            expected = pair.cross_attentions[:, :, rows][..., cols].sum(-1).mean(-1)
            np.testing.assert_allclose(view.matrices[:, :, i, j], expected, atol=1e-6)
    assert "bank" in view.key_labels and "mat" in view.labels


def test_self_attention_views_are_square_and_the_decoders_causal(pair):
    encoder, decoder = pair_attention_view(pair, "encoder"), pair_attention_view(pair, "decoder")
    np.testing.assert_array_equal(encoder.matrices, pair.source.attentions)
    np.testing.assert_array_equal(decoder.matrices, pair.target.attentions)
    assert decoder.causal and not encoder.causal and encoder.labels == encoder.key_labels


def test_alignment_is_the_argmax_over_non_special_source_tokens(pair):
    alignment = cross_alignment(pair, heads="mean")
    reduced = pair.cross_attentions.mean(axis=1)
    keys = np.flatnonzero(~pair.source.special_mask)
    assert list(alignment.queries) == list(np.flatnonzero(~pair.target.special_mask))
    for layer in range(pair.num_decoder_layers):
        for k, q in enumerate(alignment.queries):
            best = keys[np.argmax(reduced[layer, q, keys])]
            assert alignment.targets[layer, k] == best
            assert alignment.weights[layer, k] == pytest.approx(reduced[layer, q, best])
    table = alignment.long_table()
    assert len(table) == pair.num_decoder_layers * len(alignment.queries)
    assert set(table["source"]) <= set(alignment.key_labels)


def test_alignment_of_one_head_at_word_level(pair):
    alignment = cross_alignment(pair, heads=1, words=True)
    view = cross_attention_view(pair, words=True)
    q = alignment.queries[0]
    masked = np.where(view.key_special, -np.inf, view.matrices[0, 1, q])
    assert alignment.targets[0, 0] == int(np.argmax(masked))


def test_cross_statistics_against_hand_computation(pair):
    table = cross_head_statistics(pair)
    assert len(table) == pair.num_decoder_layers * pair.cross_attentions.shape[1]
    layer, head = 1, 2
    row = table[(table["layer"] == layer) & (table["head"] == head)].iloc[0]
    p = pair.cross_attentions[layer, head].astype(np.float64)
    t, s = p.shape
    queries = np.flatnonzero(~pair.target.special_mask)
    entropy = [-(p[i] * np.log(p[i])).sum() for i in queries]
    diagonal = [sum(p[i, j] * abs(j - i * (s - 1) / (t - 1)) for j in range(s)) for i in queries]
    end = [p[i, pair.source.special_mask].sum() for i in queries]
    assert row.entropy == pytest.approx(np.mean(entropy))
    assert row.diagonal == pytest.approx(np.mean(diagonal))
    assert row.end == pytest.approx(np.mean(end))
    assert row.uniform_entropy == pytest.approx(np.log(s))
    assert (table.entropy <= table.uniform_entropy + 1e-9).all()


def test_a_perfectly_diagonal_head_is_at_distance_zero(pair):
    t = pair.target.num_tokens
    diagonal = np.zeros((1, 1, t, t), dtype=np.float32)
    diagonal[0, 0, np.arange(t), np.arange(t)] = 1.0
    # a square pair whose target attends exactly along the diagonal
    fake = PairAnalysis(pair.target, pair.target, diagonal.repeat(pair.num_decoder_layers, 0), False)
    assert cross_head_statistics(fake)["diagonal"].max() == pytest.approx(0.0)


def test_non_square_figures_and_tables(pair):
    view = cross_attention_view(pair)
    t, s = len(view.labels), len(view.key_labels)
    fig = va.head_figure(view.matrices[0, 0], view.labels, key_labels=view.key_labels, title="x", causal=False,
                         colorscale="Cividis", axis_titles=("target", "source"))
    heat = fig.data[-1]
    assert len(heat.x) == s and len(heat.y) == t and np.asarray(heat.z).shape == (t, s)
    table = vt.matrix_table(view.matrices[0, 0], view.labels, causal=False, key_labels=view.key_labels)
    assert table.shape == (t, s + 1)
    grid = va.layer_grid_figure(view.matrices[0], view.labels, key_labels=view.key_labels, title="x", causal=False,
                                colorscale="Cividis")
    assert np.asarray(grid.data[0].z).shape == (t, s)
    cells = vt.cells_table(view.matrices, view.labels, causal=False, max_cells=4, key_labels=view.key_labels,
                           outer={"layer": [0, 1], "head": list(range(view.matrices.shape[1]))})
    small, rows, cols = va.block_mean_2d(view.matrices, 4)
    assert cells.shape == (small.shape[0] * small.shape[1] * len(rows), len(cols) + 3)
    overview = va.overview_figure(view.matrices, title="x", causal=False, colorscale="Cividis")
    assert overview.data[0].source.startswith("data:image/png;base64,")


def test_block_mean_2d_averages_rectangular_blocks():
    m = np.arange(4 * 6, dtype=np.float32).reshape(4, 6)
    small, rows, cols = va.block_mean_2d(m, 3)  # step 2 on both axes
    assert rows == [(0, 1), (2, 3)] and cols == [(0, 1), (2, 3), (4, 5)]
    assert small[0, 0] == pytest.approx(m[:2, :2].mean()) and small[1, 2] == pytest.approx(m[2:, 4:].mean())


def test_alignment_figures(pair):
    alignment = cross_alignment(pair)
    grid = alignment_grid(alignment, title=ATTACK)
    assert "<script" not in grid.layout.title.text
    view = cross_attention_view(pair)
    fig = alignment_figure(view.matrices[0].max(axis=0), view.labels, view.key_labels, alignment, 0, title="t")
    assert len(fig.data[1].x) == len(alignment.queries)


def _params(html: str) -> dict:
    return json.loads(re.search(r"const params = (\{.*?\}); // HACK", html, re.S).group(1))


@pytest.mark.parametrize("kind", ["head", "model"])
def test_bertviz_gets_encoder_decoder_and_cross_attention_as_bertviz_names_them(kind):
    rng = np.random.default_rng(0)
    enc, dec, cross = rng.random((2, 3, 4, 4)), rng.random((2, 3, 5, 5)), rng.random((2, 3, 5, 4))
    source, target = ["<s>", ATTACK, "b", "</s>"], ["</s>", "x", "y", "z", ATTACK]
    html = bv.seq2seq_view_html(kind, enc, dec, cross, source, target, layers=[1], layer=1, show="Cross")
    params = _params(html)
    names = [part["name"] for part in params["attention"]]
    assert names == ["Encoder", "Decoder", "Cross"] and params["default_filter"] == "2"
    cross_part = params["attention"][2]
    assert cross_part["left_text"] == target and cross_part["right_text"] == source
    np.testing.assert_allclose(cross_part["attn"], np.round(cross[[1]], bv.DECIMALS))
    assert "<option value=\"2\" selected>Cross</option>" in html
    assert ATTACK not in html  # tokens only inside escaped JSON


def test_bertviz_budget_counts_all_three_attentions():
    assert bv.seq2seq_budget(2, 10, 5) == bv.MAX_WEIGHTS // (2 * (100 + 25 + 50))
