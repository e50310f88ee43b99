"""Attention figures (viz/attention.py): shapes, labels, masking, special tokens, word merging, long inputs."""

from __future__ import annotations

import base64
import io

import numpy as np
import plotly.graph_objects as go
import pytest
from PIL import Image

from core.attention_heads.attention import attention_view
from core.attention_heads.neuron_view import queries_and_keys
from core.model.inference import analyze
from viz import attention as va
from viz import attention_cells as va_cells
from viz import attention_tables as vt
from viz.common import COLORBLIND_SAFE


def _mosaic(fig) -> np.ndarray:
    source = fig.data[0].source
    return np.array(Image.open(io.BytesIO(base64.b64decode(source.split(",", 1)[1]))))


def test_masked_upper_hides_only_the_future():
    m = np.arange(9, dtype=np.float32).reshape(3, 3)
    out = va.masked_upper(m, causal=True)
    assert np.isnan(out[0, 1]) and np.isnan(out[0, 2]) and np.isnan(out[1, 2])
    assert out[1, 0] == 3 and out[2, 2] == 8 and out[2, 0] == 6  # diagonal and past kept
    assert not np.isnan(va.masked_upper(m, causal=False)).any()


def test_block_mean_averages_blocks_and_skips_masked_cells():
    m = np.array([[1, np.nan, np.nan, np.nan], [3, 5, np.nan, np.nan], [0, 2, 4, np.nan], [6, 8, 10, 12]], dtype=np.float32)
    small, bins = va_cells.block_mean(m, max_cells=2)
    assert bins == [(0, 1), (2, 3)]
    assert small[0, 0] == pytest.approx((1 + 3 + 5) / 3)  # the masked cell is not a zero
    assert np.isnan(small[0, 1])  # a block of only future tokens stays masked
    assert small[1, 0] == pytest.approx((0 + 2 + 6 + 8) / 4)
    assert small[1, 1] == pytest.approx((4 + 10 + 12) / 3)


def test_block_mean_of_an_uneven_length_keeps_every_token():
    small, bins = va_cells.block_mean(np.ones((2, 5, 5), dtype=np.float32), max_cells=2)
    assert small.shape == (2, 2, 2) and bins == [(0, 2), (3, 4)]
    assert np.allclose(small, 1.0)  # padding is not averaged in


def test_head_figure_labels_and_values_for_an_encoder(tiny_bert):
    a = analyze(tiny_bert, "the bank of the river")
    fig = va.head_figure(a.attentions[1, 2], ["[CLS]", "the", "bank", "of", "the", "river", "[SEP]"],
                         title="t", causal=False, colorscale="Cividis")
    (trace,) = fig.data
    assert list(trace.x) == ["[CLS]", "the (1)", "bank", "of", "the (4)", "river", "[SEP]"]  # repeats kept apart
    # the weights as numbers that print like the weights (viz.attention.printed_numbers): within the hover's last digit
    assert np.allclose(va_cells.shown_values(trace), a.attentions[1, 2], rtol=0, atol=0.5 * 10**-va_cells.HEAD_DIGITS + 1e-9)
    assert (trace.zmin, trace.zmax) == (0.0, 1.0)
    assert fig.layout.xaxis.type == "category" and fig.layout.yaxis.autorange == "reversed"  # query 0 on top


def test_head_figure_masks_a_decoder_instead_of_drawing_zeros(tiny_gpt2):
    a = analyze(tiny_gpt2, "the cat sat on the mat")
    n = a.num_tokens
    fig = va.head_figure(a.attentions[0, 0], [str(i) for i in range(n)], title="t", causal=True, colorscale="Viridis")
    mask, data = fig.data
    z = np.asarray(data.z, dtype=float)
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    assert np.isnan(z[upper]).all() and not np.isnan(z[~upper]).any()
    assert (np.asarray(mask.z) == upper).all() and mask.hoverinfo == "skip"
    assert data.hoverongaps is False
    assert "masked" in fig.layout.title.text
    assert fig.layout.xaxis.type == "category"  # labels "0", "1" … stay labels, not numbers


def test_figures_escape_token_markup():
    labels = ["<img src=x onerror=alert(1)>", "b"]
    fig = va.head_figure(np.eye(2), labels, title="<b>x</b>", causal=False, colorscale="Viridis")
    assert fig.data[0].x[0] == "&lt;img src=x onerror=alert(1)&gt;"
    assert "<b>" not in fig.layout.title.text and "%{" not in fig.data[0].x[0]
    assert "<img" not in fig.data[0].hovertemplate


def test_layer_grid_has_one_heatmap_per_head_with_head_titles(tiny_model):
    a = analyze(tiny_model, "the cat sat on the mat")
    view = attention_view(a)
    fig = va.layer_grid_figure(view.matrices[1], view.labels, title="t", causal=a.is_decoder, colorscale="Viridis")
    data = [t for t in fig.data if t.hoverinfo != "skip"]
    assert len(data) == a.num_heads
    assert [ann.text for ann in fig.layout.annotations] == [f"head {h}" for h in range(a.num_heads)]
    for h, trace in enumerate(data):
        expected = va.masked_upper(view.matrices[1, h], a.is_decoder)
        assert np.allclose(np.asarray(trace.z, dtype=float), expected, equal_nan=True)
    assert sum(bool(t.showscale) for t in data) == 1  # one shared colour bar on the fixed scale


def test_layer_grid_per_head_scale_uses_each_heads_maximum():
    m = np.stack([np.full((3, 3), 0.2), np.full((3, 3), 0.6)])
    fig = va.layer_grid_figure(m, list("abc"), title="t", causal=False, colorscale="Viridis", per_head_scale=True)
    assert [t.zmax for t in fig.data] == pytest.approx([0.2, 0.6])
    assert "own maximum" in fig.layout.title.text


def test_layer_grid_of_a_long_input_is_bounded():
    n = 300
    m = np.random.default_rng(0).random((12, n, n), dtype=np.float32)
    fig = va.layer_grid_figure(m, [f"t{i}" for i in range(n)], title="t", causal=False, colorscale="Viridis", max_cells=100)
    z = va_cells.shown_values(fig.data[0])
    assert z.shape == (100, 100)  # 3 × 3 tokens per cell
    assert z[0, 0] == pytest.approx(m[0, :3, :3].mean(), abs=0.5 * 10**-va.GRID_DIGITS)  # at the hover's precision
    assert fig.data[0].x[0] == "t0…t2"
    assert "averages 3 × 3 tokens" in fig.layout.title.text


def test_overview_is_one_image_with_a_thumbnail_per_head(tiny_model):
    a = analyze(tiny_model, "the cat sat on the mat")
    layers, heads, n = a.num_layers, a.num_heads, a.num_tokens
    fig = va.overview_figure(a.attentions, title="t", causal=a.is_decoder, colorscale="Viridis", gap=2)
    image = _mosaic(fig)  # palette indices
    zoom = -(-va_cells.OVERVIEW_MIN_PIXELS // n)
    pitch = n * zoom + 2
    assert image.shape == (layers * pitch, heads * pitch)
    assert (image[:, n * zoom : pitch] == va_cells.GAP_INDEX).all()  # gap between thumbnails
    hover = fig.data[1]
    assert np.asarray(hover.customdata).shape == (layers, heads, 2)
    assert "layer %{customdata[0]}, head %{customdata[1]}" in hover.hovertemplate
    thumbnail = image[pitch : pitch + n * zoom, 0 : n * zoom][::zoom, ::zoom]  # layer 1, head 0
    if a.is_decoder:
        assert (thumbnail[np.triu_indices(n, k=1)] == va_cells.MASK_INDEX).all()
    expected = np.round(np.clip(a.attentions[1, 0], 0, 1) * (va_cells.LEVELS - 1))
    keep = np.tril(np.ones((n, n), dtype=bool)) if a.is_decoder else np.ones((n, n), dtype=bool)
    assert np.abs(thumbnail[keep].astype(int) - expected[keep]).max() <= 1


def test_rollout_overview_puts_its_layers_side_by_side(tiny_model):
    """Issue 28: one map per layer (rollout) was one narrow column in a wide, empty figure."""
    a = analyze(tiny_model, "the cat sat on the mat")
    layers, n = a.num_layers, a.num_tokens
    rollout = a.attentions.mean(axis=1, keepdims=True)  # [layers, 1, n, n]
    fig = va.overview_figure(rollout, title="t", causal=a.is_decoder, colorscale="Viridis", gap=2,
                             head_names=["all heads (rollout)"])
    image = _mosaic(fig)
    pitch = n * -(-va_cells.OVERVIEW_MIN_PIXELS // n) + 2
    assert image.shape == (pitch, layers * pitch)  # one row, a thumbnail per layer
    assert list(fig.layout.xaxis.ticktext) == [str(layer) for layer in range(layers)]
    assert fig.layout.xaxis.title.text.startswith("layer")
    hover = fig.data[1]
    assert np.asarray(hover.customdata).shape == (1, layers, 1) and "through layer" in hover.hovertemplate
    zoom = -(-va_cells.OVERVIEW_MIN_PIXELS // n)
    last = image[0 : n * zoom, (layers - 1) * pitch : (layers - 1) * pitch + n * zoom][::zoom, ::zoom]
    expected = np.round(np.clip(rollout[-1, 0], 0, 1) * (va_cells.LEVELS - 1))
    keep = np.tril(np.ones((n, n), dtype=bool)) if a.is_decoder else np.ones((n, n), dtype=bool)
    assert np.abs(last[keep].astype(int) - expected[keep]).max() <= 1  # the last thumbnail is the last layer


def test_overview_of_512_tokens_on_12_by_12_heads_stays_small():
    rng = np.random.default_rng(0)
    m = rng.random((12, 12, 512, 512), dtype=np.float32)
    m /= m.sum(-1, keepdims=True)
    fig = va.overview_figure(m, title="t", causal=True, colorscale="Cividis")
    assert len(fig.to_json()) < 2_000_000  # the raw numbers would be 37.7 M floats
    assert _mosaic(fig).shape[0] == 12 * (va.OVERVIEW_MAX_CELLS + 2)


def test_per_head_quantisation_stretches_each_head():
    m = np.stack([np.full((1, 2, 2), 0.1), np.full((1, 2, 2), 0.5)], axis=1)  # [1 layer, 2 heads]
    m[0, 0, 0, 0] = 0.05
    fixed = va_cells.quantise(m, per_head_scale=False)
    own = va_cells.quantise(m, per_head_scale=True)
    assert fixed[0, 1, 0, 0] == round(0.5 * (va_cells.LEVELS - 1))
    assert own[0, 0, 1, 1] == va_cells.LEVELS - 1 and own[0, 1, 1, 1] == va_cells.LEVELS - 1
    assert own[0, 0, 0, 0] == round(0.5 * (va_cells.LEVELS - 1))


def test_special_tokens_and_word_level_reach_the_figures(tiny_bert):
    a = analyze(tiny_bert, "the bank of a river")
    hidden = attention_view(a, special="hide")
    fig = va.head_figure(hidden.matrices[0, 0], hidden.labels, title="t", causal=False, colorscale="Viridis")
    assert list(fig.data[0].x) == ["the", "bank", "of", "a", "river"]  # [CLS]/[SEP] gone, by the tokenizer's marks
    renorm = attention_view(a, special="renormalise")
    table = vt.matrix_table(renorm.matrices[0, 0], renorm.labels, causal=False)
    assert np.allclose(table.drop(columns="query").sum(axis=1), 1.0)
    assert list(table["query"]) == ["the", "bank", "of", "a", "river"]


def test_word_level_labels_are_words(tiny_gpt2):
    a = analyze(tiny_gpt2, "The guitar plays")
    words = attention_view(a, words=True)
    fig = va.head_figure(words.matrices[0, 0], words.labels, title="t", causal=True, colorscale="Viridis")
    assert list(fig.data[1].x) == ["The", "guitar", "plays"]
    z = np.asarray(fig.data[1].z, dtype=float)
    assert np.isnan(z[0, 1]) and np.isnan(z[1, 2])  # a word cannot see later words
    assert np.allclose(np.nansum(z, axis=1), 1.0)  # sum over key pieces keeps rows distributions


def test_cells_table_names_layers_heads_and_queries():
    m = np.random.default_rng(1).random((2, 3, 4, 4))
    table = vt.cells_table(m, list("abcd"), causal=False, max_cells=4, outer={"layer": [0, 1], "head": ["h0", "h1", "h2"]})
    assert list(table.columns) == ["layer", "head", "query", "a", "b", "c", "d"]
    assert len(table) == 2 * 3 * 4
    row = table[(table["layer"] == 1) & (table["head"] == "h2") & (table["query"] == "c")]
    assert np.allclose(row[list("abcd")].to_numpy()[0], m[1, 2, 2], atol=1e-6)


def test_queries_and_keys_reproduce_the_models_attention(tiny_bert):
    a = analyze(tiny_bert, "the cat sat on the mat")
    q, k = queries_and_keys(tiny_bert, a)
    d = q.shape[-1]
    scores = np.einsum("lhtd,lhsd->lhts", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(d)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    assert np.allclose(weights, a.attentions, atol=1e-5)


@pytest.mark.parametrize("causal, per_head_scale, tokens", [(False, False, 12), (True, True, 9), (True, False, 300)])
def test_overview_is_built_in_the_form_plotly_validation_gives_it(causal, per_head_scale, tokens):
    """The overview is built without plotly's property validation (it is rebuilt for every new text):
    validating it afterwards must neither fail nor change anything that is sent to the browser."""
    import json

    import plotly.io as pio

    rng = np.random.default_rng(0)
    matrices = rng.random((3, 4, tokens, tokens)).astype(np.float32)
    matrices /= matrices.sum(-1, keepdims=True)
    fig = va.overview_figure(matrices, title="<b>a</b> & b", causal=causal, colorscale=COLORBLIND_SAFE,
                             per_head_scale=per_head_scale, head_names=["h0", "h1", "h<2>", "h3"])
    validated = go.Figure(fig.to_dict())  # every property through plotly's validators; raises on an invalid one
    assert json.loads(pio.to_json(validated, validate=False)) == json.loads(pio.to_json(fig, validate=False))
