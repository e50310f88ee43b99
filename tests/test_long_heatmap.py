"""The long-text Attention view: pooled pixels, zoom and thumbnails (core.attention_heads.pooling, core.attention_heads.long_attention,
viz.long_heatmap), against weights from a plainly loaded eager model pooled by hand with loops over blocks."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
import transformers
from transformers import AutoModelForCausalLM, GPT2TokenizerFast

from core.attention_heads.long_attention import pooled_head, row_weights, thumbnails, zoom
from core.attention_heads.pooling import pixel_starts, pool, visible_blocks
from core.model.inference import analyze
from core.model.models import load_model
from core.model.tokens import token_labels
from tests.model_factory import SMALL_CONFIG, build_tiny_gpt2
from tests.test_head_reading import reading_by_hand
from viz import long_heatmap as lh

WINDOW = 16
POSITIONS = 4096


def build_tiny_long_gemma3(folder, *, seed: int = 0):
    """A random 2-layer Gemma 3 (layer 0 a sliding window of ``WINDOW``, layer 1 full) that reads ``POSITIONS`` tokens."""
    build_tiny_gpt2(folder, seed=seed)
    tokenizer = GPT2TokenizerFast.from_pretrained(folder)
    tokenizer.model_max_length = POSITIONS
    tokenizer.save_pretrained(folder)
    config = transformers.Gemma3TextConfig(
        **{**SMALL_CONFIG, "max_position_embeddings": POSITIONS}, head_dim=8, sliding_window=WINDOW, query_pre_attn_scalar=16,
        layer_types=["sliding_attention", "full_attention"], vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(seed)
    for stale in folder.glob("*.safetensors"):
        stale.unlink()
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    return folder


def long_text(tokens: int) -> str:
    words = "the cat sat on the mat and the dog ran to the bank of the river while birds sang".split()
    return " ".join(words[i % len(words)] for i in range(tokens))


@pytest.fixture(scope="module")
def long_gemma_dir(tmp_path_factory) -> str:
    return str(build_tiny_long_gemma3(tmp_path_factory.mktemp("models") / "tiny-long-gemma3"))


@pytest.fixture(scope="module")
def long_run(long_gemma_dir):
    """The tiny model, an analysis of about 600 tokens, and its weights from a plain eager forward pass."""
    model = load_model(long_gemma_dir)
    analysis = analyze(model, long_text(700), max_tokens=600, on_demand=False)  # every head's weights stored
    plain = AutoModelForCausalLM.from_pretrained(long_gemma_dir, attn_implementation="eager").eval()
    with torch.no_grad():
        out = plain(input_ids=torch.tensor([analysis.input_ids]), output_attentions=True)
    eager = np.stack([a[0].float().numpy() for a in out.attentions])  # [layers, heads, T, T]
    return model, analysis, eager


def on_demand_of(model, analysis):
    """The same text analysed as a long text is kept (above 512 tokens): queries and keys, weights computed per head."""
    return analyze(model, analysis.text, max_tokens=analysis.num_tokens, on_demand=True)


def blocks_by_hand(n: int, pixels: int) -> list[range]:
    """The positions pixel ``j`` of ``pixels`` over ``n`` positions covers, worked out geometrically: the axis is
    ``n`` token widths drawn on ``pixels`` pixels; a pixel starts at the token under its left edge and runs up to
    the token under the next pixel's left edge (at least that one token)."""
    under = [math.floor(Fraction(j * n, pixels)) for j in range(pixels + 1)]
    under[pixels] = n
    return [range(under[j], max(under[j] + 1, under[j + 1])) for j in range(pixels)]


def pooled_by_hand(matrix: np.ndarray, pixels: int, how: str) -> np.ndarray:
    blocks = blocks_by_hand(matrix.shape[0], pixels)
    out = np.zeros((pixels, pixels))
    for i, rows in enumerate(blocks):
        for j, cols in enumerate(blocks):
            block = matrix[rows.start : rows.stop, cols.start : cols.stop]
            out[i, j] = block.max() if how == "max" else block.sum(dtype=np.float64)
    return out


@pytest.mark.parametrize("how", ["max", "sum"])
@pytest.mark.parametrize(("n", "pixels"), [(50, 8), (48, 8), (10, 20), (601, 200), (7, 7)])
def test_pooled_pixels_equal_the_cells_pooled_by_hand(how, n, pixels):
    matrix = np.random.default_rng(n).random((n, n), dtype=np.float32)
    starts = pixel_starts(n, pixels)
    assert len(starts) == pixels and starts[0] == 0 and starts[-1] < n
    assert [b.start for b in blocks_by_hand(n, pixels)] == starts.tolist()
    np.testing.assert_allclose(pool(matrix, starts, starts, how), pooled_by_hand(matrix, pixels, how), rtol=1e-6)


def test_blocks_without_a_visible_cell_are_found_from_their_bounds():
    n, pixels, window = 37, 8, 7
    starts = pixel_starts(n, pixels)
    ends = np.array([b.stop - 1 for b in blocks_by_hand(n, pixels)])
    q, k = np.arange(n)[:, None], np.arange(n)[None, :]
    cells = (k <= q) & (q - window < k)
    by_hand = pooled_by_hand(cells.astype(np.float32), pixels, "max") > 0
    np.testing.assert_array_equal(visible_blocks(starts, ends, starts, ends, causal=True, window=window), by_hand)
    assert visible_blocks(starts, ends, starts, ends, causal=False).all()


@pytest.mark.parametrize("layer", [0, 1])  # a sliding window of 16, then a full layer
@pytest.mark.parametrize("how", ["max", "sum"])
def test_a_pooled_head_is_the_eager_weights_pooled_by_hand(long_run, layer, how):
    model, analysis, eager = long_run
    n = analysis.num_tokens
    on_demand = on_demand_of(model, analysis)
    for run in (analysis, on_demand):
        head = pooled_head(model, run, layer, 3, pixels=128)[how]
        assert head.values.shape == (128, 128) and head.per_pixel == (4, 5)  # 600 tokens on 128 pixels
        expected = pooled_by_hand(eager[layer, 3], 128, how)
        q, k = np.arange(n)[:, None], np.arange(n)[None, :]
        seen = (k <= q) & ((q - WINDOW < k) if layer == 0 else True)
        hidden = pooled_by_hand(seen.astype(np.float32), 128, "max") == 0
        assert np.isnan(head.values[hidden]).all() and not np.isnan(head.values[~hidden]).any()
        np.testing.assert_allclose(head.values[~hidden], expected[~hidden], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("layer", [0, 1])  # a sliding window of WINDOW, then a full layer
def test_a_pooled_heads_reading_is_its_eager_weights_read_by_hand(long_run, layer):
    model, analysis, eager = long_run
    expected = reading_by_hand(eager[layer, 3].astype(np.float64), window=WINDOW if layer == 0 else None)
    for run in (analysis, on_demand_of(model, analysis)):  # every weight held, and computed in bands of rows
        got = pooled_head(model, run, layer, 3, pixels=128)["max"].reading
        assert got.queries == analysis.num_tokens
        np.testing.assert_allclose((got.first, got.uniform_first, got.local), expected[:3], rtol=1e-4)
        assert got.reach == expected[3]


def test_zoom_returns_exactly_the_cells_and_labels_of_the_region(long_run):
    model, analysis, eager = long_run
    on_demand = on_demand_of(model, analysis)
    queries, keys = range(530, 562), range(520, 552)
    labels = token_labels(analysis)
    zoomed = zoom(model, on_demand, 0, 1, queries, keys)
    np.testing.assert_allclose(zoomed.values, eager[0, 1, 530:562, 520:552], rtol=1e-4, atol=1e-7)
    assert zoomed.query_labels == labels[530:562] and zoomed.key_labels == labels[520:552]
    q, k = np.arange(530, 562)[:, None], np.arange(520, 552)[None, :]
    np.testing.assert_array_equal(zoomed.hidden, ~((k <= q) & (q - WINDOW < k)))
    held = zoom(model, analysis, 0, 1, queries, keys)  # the analysis's own weights: the very same cells
    np.testing.assert_array_equal(held.values, analysis.attentions[0, 1, 530:562, 520:552])
    fig = lh.zoom_figure(zoomed, title="zoom", colorscale="Viridis")
    heat = [t for t in fig.data if t.type == "heatmap" and t.name != "masked"][0]
    assert list(heat.y) == [f"{label} ({p})" for label, p in zip(labels[530:562], queries, strict=True)]
    assert list(heat.x)[0].endswith("(520)")
    table = lh.zoom_table(zoomed)
    assert table.shape == (32, 33) and np.isnan(table.iloc[0, -1])  # query 530 cannot see key 551
    np.testing.assert_allclose(table.iloc[:, 1:].to_numpy()[~zoomed.hidden], eager[0, 1, 530:562, 520:552][~zoomed.hidden],
                               rtol=1e-4, atol=1e-7)


def test_rows_are_computed_alone_from_the_recorded_queries_and_keys(long_run):
    model, analysis, eager = long_run
    rows = [0, 17, 599]
    got = row_weights(model, on_demand_of(model, analysis), 1, [0, 2], rows)
    np.testing.assert_allclose(got, eager[1][[0, 2]][:, rows], rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("how", ["max", "sum"])
def test_thumbnails_count_order_and_pixels(long_run, how):
    model, analysis, eager = long_run
    n = analysis.num_tokens
    thumbs = thumbnails(model, on_demand_of(model, analysis), (1, 0), how, 64)
    blocks = blocks_by_hand(n, 64)
    rows = np.array([b.stop - 1 for b in blocks])  # the last query of each block of rows
    assert thumbs.values.shape == (2, model.num_heads, 64, 64)
    np.testing.assert_array_equal(thumbs.rows, rows)
    for i, layer in enumerate((1, 0)):  # in the order asked for
        for h in range(model.num_heads):
            sampled = eager[layer, h][rows]
            by_hand = np.stack([sampled[:, b.start : b.stop].max(axis=1) if how == "max" else
                                sampled[:, b.start : b.stop].sum(axis=1) for b in blocks], 1)
            shown = ~np.isnan(thumbs.values[i, h])
            np.testing.assert_allclose(thumbs.values[i, h][shown], by_hand[shown], rtol=1e-4, atol=1e-6)
    fig = lh.thumbnails_figure(thumbs, title="t", colorscale="Viridis", selected=(0, 2))
    points = fig.data[1]
    assert [list(c) for c in points.customdata] == [[layer, h] for layer in (1, 0) for h in range(model.num_heads)]
    assert list(fig.layout.yaxis.ticktext) == ["1", "0"]
    table = lh.thumbnails_table(thumbs)
    assert len(table) == 2 * model.num_heads * len(rows) and list(table["layer"][:1]) == [1]


def test_the_pooled_figure_says_how_and_is_small(long_run):
    model, analysis, _ = long_run
    head = pooled_head(model, analysis, 1, 0, pixels=100)
    for how, word in (("max", "maximum"), ("sum", "sum")):
        fig = lh.pooled_head_figure(head[how], title="<b>x</b>", colorscale="Viridis", region=(range(0, 64), range(0, 64)))
        # 600 tokens on 100 pixels: 6 each
        assert f"each pixel is the {word} of the weights it covers, 6 tokens each way: 600 tokens on 100 screen" in (
            fig.layout.title.text)
        assert "&lt;b&gt;x&lt;/b&gt;" in fig.layout.title.text
        assert fig.layout.xaxis.range == (-0.5, analysis.num_tokens - 0.5)
        assert len(json.dumps(fig.to_plotly_json(), default=str)) < 60_000
    table = lh.pooled_table(head["max"])
    assert table.shape == (len(head["max"].row_starts), len(head["max"].col_starts) + 1)
    assert table["queries"].iloc[-1].endswith(str(analysis.num_tokens - 1))


HOSTILE = "<img src=x onerror=alert(1)> "


@pytest.mark.app
def test_the_attention_page_draws_a_long_text_pooled_with_a_zoom_that_names_its_tokens(long_gemma_dir, monkeypatch):
    from tests.test_app import open_app, page_errors
    from ui.page_state import view_query

    monkeypatch.setenv("EXPLORER_MAX_TOKENS", str(POSITIONS))
    at = open_app({"model": long_gemma_dir, "text": HOSTILE + long_text(2000), "zoom": "32", "head": "2"},
                  page="app_pages/attention.py")
    assert not page_errors(at), page_errors(at)
    # the head switch's "Head n" buttons are the head's one control here; the link's head is the one drawn
    assert not [box for box in at.selectbox if box.label.startswith("Head")]
    assert view_query(at.session_state)["head"] == "2"
    specs = {chart.proto.id: json.loads(chart.proto.spec) for chart in at.get("plotly_chart")}
    titles = [spec["layout"].get("title", {}).get("text", "").replace("<br>", " ") for spec in specs.values()]
    pooled = next(spec for spec, title in zip(specs.values(), titles, strict=True) if "each pixel is the maximum" in title)
    n = int(pooled["layout"]["xaxis"]["range"][1] + 0.5)
    assert 3000 < n < POSITIONS and pooled["data"][0]["type"] == "image"
    thumbs = [spec for spec in specs.values() if spec["data"][-1].get("customdata")]  # a layer's heads to click
    assert [tuple(c) for c in thumbs[0]["data"][-1]["customdata"]] == [(0, h) for h in range(4)]
    # the title names the head; it may wrap where the model's name (a temporary folder's path here) is long
    assert "layer 0, head 2" in pooled["layout"]["title"]["text"].replace("<br>", " ")
    zoomed = next(spec for spec, title in zip(specs.values(), titles, strict=True) if "queries 0-31, keys 0-31" in title)
    labels = [t for t in zoomed["data"] if t.get("name") != "masked"][0]["y"]
    assert len(labels) == 32 and labels[0].endswith("(0)") and labels[31].endswith("(31)")
    assert any("&lt;" in label for label in labels) and not any("<" in label for label in labels)
    assert any(f"{n:,} tokens, more than the 512" in c.value for c in at.caption)


def test_a_dragged_box_becomes_the_smallest_square_zoom_that_covers_it_inside_the_text():
    from core.attention_heads.pooling import region_around

    sides = [16, 32, 64, 128, 256]
    assert region_around((-0.5, 63.5), (99.5, 163.5), 4096, sides) == (100, 0, 64)  # 64 × 64 cells exactly
    assert region_around((4000.0, 4100.0), (10.0, 20.0), 4096, sides) == (0, 4096 - 128, 128)  # moved inside
    assert region_around((3000.0, 0.0), (20.0, 10.0), 4096, sides)[2] == 256  # wider than any side: the largest
    assert region_around((0.0, 5.0), (0.0, 5.0), 10, sides) == (0, 0, 10)  # a text shorter than the smallest side
