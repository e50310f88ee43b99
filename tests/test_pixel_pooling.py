"""A one-token attention sink survives pooling for the screen (issue 51 item 2): on a synthetic decoder head that puts
0.6 of every query's attention on token 0, pooled for a column of 390, 820 and 1,872 CSS pixels at device pixel
ratios 1 and 2, the sink's column is its own colour in the head, in the layer's thumbnails and in every thumbnail of
a 30-layer × 9-head mosaic; each picture's plot area is exactly its image's pixels (nothing for the browser to
resample), and the figure says how many tokens a pixel covers."""

from __future__ import annotations

import base64
import io
import math
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from core.attention_heads.long_attention import pooled_head, thumbnails
from viz import long_heatmap as lh

N = 3000
SINK = 0.6
WIDTHS = [390, 820, 1872]


@pytest.fixture(scope="module")
def sink_head():
    """float32 ``[1, 1, N, N]``: query 0 on itself; every later query 0.6 on token 0, 0.4 evenly on keys 1..q."""
    q = np.arange(N, dtype=np.float32)[:, None]
    k = np.arange(N)[None, :]
    m = np.where((k >= 1) & (k <= q), 0.4 / np.maximum(q, 1), 0.0).astype(np.float32)
    m[:, 0] = SINK
    m[0, 0] = 1.0
    np.testing.assert_allclose(m.sum(axis=1), 1.0, rtol=1e-4)
    analysis = SimpleNamespace(num_tokens=N, on_demand=None, attentions=m[None, None], is_decoder=True,
                               sliding_windows=None)
    return SimpleNamespace(num_heads=1), analysis


def png_of(fig, trace: int = 0) -> np.ndarray:
    source = fig.data[trace].source
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(source.split(",", 1)[1]))).convert("RGB"))


def plot_area(fig, dpr: float) -> tuple[float, float]:
    layout = fig.layout
    return ((layout.width - layout.margin.l - layout.margin.r) * dpr,
            (layout.height - layout.margin.t - layout.margin.b) * dpr)


@pytest.mark.parametrize("dpr", [1.0, 2.0])
@pytest.mark.parametrize("width", WIDTHS)
def test_the_sink_column_keeps_its_pixel_in_the_head(sink_head, width, dpr):
    model, analysis = sink_head
    pixels = round((width - 190) // 4 * 4 * dpr)  # the plot area of a figure in a column this wide
    head = pooled_head(model, analysis, 0, 0, pixels)["max"]
    values = head.values
    assert values.shape == (pixels, pixels)
    assert (values[:, 0] >= SINK - 1e-6).all()  # every pixel row: the sink, whatever else the pixel covers
    tokens_wide = math.ceil(N / pixels)
    far = values[4:, 2 * tokens_wide + 2 :]  # away from the sink column and the first rows
    assert np.nanmax(far) < SINK / 2
    fig = lh.pooled_head_figure(head, title="sink", colorscale="Viridis", dpr=dpr)
    image = png_of(fig)
    assert image.shape[:2] == (pixels, pixels) and plot_area(fig, dpr) == (pixels, pixels)  # one image pixel per screen pixel
    wide = -(-pixels // N)  # pixels token 0 is drawn across (more than one when there are more pixels than tokens)
    sink_colour = image[pixels // 2, 0]
    assert (image[wide:, :wide] == sink_colour).all()  # the sink's colour all down its column (query 0's rows aside)
    assert (image[pixels // 2, wide:] != sink_colour).any(axis=-1).all()  # and nowhere else along the row
    fewest, most = N // pixels, -(-N // pixels)
    covers = f"{fewest}" if fewest == most else f"{fewest} or {most}"
    note = f"{covers} tokens each way: 3,000 tokens on {pixels:,} screen pixels" if pixels < N else (
        f"every token pair its own cell, drawn {pixels / N:.1f} pixels wide")
    assert note in fig.layout.title.text


@pytest.mark.parametrize("dpr", [1.0, 2.0])
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(("layers", "heads"), [(1, 9), (30, 9)])  # a layer's overview; every layer of SmolLM2-135M
def test_the_sink_column_keeps_its_pixel_in_every_thumbnail(sink_head, width, dpr, layers, heads):
    model, analysis = sink_head
    tile = lh.thumbnail_pixels(width - 90, 1450, heads, layers, dpr)
    assert tile >= lh.THUMB_FEWEST
    one = thumbnails(model, analysis, (0,), "max", tile)
    assert one.values.shape == (1, 1, tile, tile) and (one.values[0, 0, :, 0] >= SINK - 1e-6).all()
    mosaic = SimpleNamespace(values=np.broadcast_to(one.values, (layers, heads, tile, tile)), layers=tuple(range(layers)),
                             rows=one.rows, col_starts=one.col_starts, num_tokens=N, how="max")
    fig = lh.thumbnails_figure(mosaic, title="every head", colorscale="Viridis", dpr=dpr)
    image = png_of(fig)
    pitch = tile + lh.THUMB_GAP
    assert image.shape[:2] == (layers * pitch, heads * pitch)
    assert plot_area(fig, dpr) == (heads * pitch, layers * pitch)  # drawn one image pixel per screen pixel
    if layers == 1:
        assert heads * pitch <= (width - 90) * dpr  # the layer's overview fits its column
    for layer in range(layers):
        for h in range(heads):
            cell = image[layer * pitch : layer * pitch + tile, h * pitch : h * pitch + tile]
            sink_colour = cell[tile // 2, 0]
            assert (cell[1:, 0] == sink_colour).all()
            assert (cell[tile // 2, -(-tile // N) :] != sink_colour).any(axis=-1).all()
