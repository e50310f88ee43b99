"""The slide rules in viz.common: wrapping, tick thinning, legends, exports, applied to every figure the app draws."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from core.attention_heads.attention import attention_maxima
from core.attention_heads.head_reading import HeadReading
from core.attention_heads.long_attention import PooledHead, Thumbnails, Zoom
from core.attention_heads.pooling import pixel_starts, pool
from core.causal.flow import Edge, RouteGraph
from core.model.inference import analyze
from tests.test_flow_page import example_route_graph as flow_graph
from viz import attention as va
from viz import long_heatmap as lh
from viz.common import token_axis
from viz.compare import attention_heatmap, similarity_by_layer_chart
from viz.drift import cls_violin_figure, layer_violin_figure
from viz.fit import reading
from viz.fit.reading import copy_figure
from viz.fit.slide import fit_for_slide
from viz.fit.text import LINE_BREAK, TICK_PITCH, export_options, slide_font_size, text_width, wrap_text
from viz.fit.width import plot_area, thin_ticks
from viz.flow import route_figure
from viz.head_stats import head_heatmap, head_heatmaps
from viz.inside import component_bars, matrix_heatmap, stacked_token_bars, token_bars
from viz.long_context import distance_heatmap, sink_heatmap
from viz.maxima import attention_panels, maxima_grid, special_share_chart
from viz.needle import grid_heatmap
from viz.predictions import fill_in_bars, next_token_heatmap
from viz.qk_map import matrix_figure, query_key_figure
from viz.room import room_map_figure, vote_figure
from viz.senses import sense_projection_figure, separation_figure
from viz.tokens import token_layer_heatmap

RNG = np.random.default_rng(0)


def _lines(text: str) -> list[str]:
    return LINE_BREAK.split(text)


def test_wrap_keeps_every_word_and_fits_each_line():
    title = "Separation of the senses measured in the full embedding space, layer by layer"
    wrapped = wrap_text(title, 200, 16)
    assert len(_lines(wrapped)) > 1
    assert " ".join(_lines(wrapped)) == title
    assert all(text_width(line, 16) <= 200 for line in _lines(wrapped))


def test_wrap_keeps_small_lines_small_and_long_words_whole():
    wrapped = wrap_text("Title<br><sub>a note that is far too long for one short line</sub>", 120, 20)
    lines = _lines(wrapped)
    assert lines[0] == "Title"
    assert all(line.startswith("<sub>") and line.endswith("</sub>") for line in lines[1:]) and len(lines) > 2
    assert wrap_text("Supercalifragilistic", 10, 20) == "Supercalifragilistic"


def test_font_grows_with_the_figure_within_bounds():
    assert slide_font_size(300) == 12 and slide_font_size(3000) == 20
    assert slide_font_size(600) < slide_font_size(1000) <= slide_font_size(1232)


@pytest.mark.parametrize("width", [300, 640, 800, 1232, 1920])
def test_export_is_16_9_at_1920_by_1080_pixels(width):
    options = export_options(width)
    assert options["width"] * options["scale"] == 1920 and options["height"] * options["scale"] == 1080


def _png_size(options: dict) -> tuple[int, int]:
    """The PNG Plotly's camera button saves with these ``toImageButtonOptions``: its canvas is CSS size × scale, and
    a canvas's width and height are whole pixels, the fraction cut off (plotly.js ``snapshot/svgtoimg.js``)."""
    return int(options["width"] * options["scale"]), int(options["height"] * options["scale"])


def test_the_camera_saves_exactly_1920_pixels_wide_in_both_modes():
    """Issue 40, item 21: a figure on the page at 749 CSS pixels saved 1919 pixels wide (1920 / 749 × 749 < 1920).
    On the page: 1920 wide at the figure's own proportions; in presentation mode (no height): 1920 × 1080."""
    from ui.figures import plotly_config

    for width in range(200, 1921):
        png_width, png_height = _png_size(plotly_config("f", width, 684)["toImageButtonOptions"])
        assert png_width == 1920 and abs(png_height - 684 * 1920 / width) <= 1, (width, png_width, png_height)
    for width in (300, 640, 749, 1232, 1280, 1920):
        assert _png_size(plotly_config("f", width)["toImageButtonOptions"]) == (1920, 1080)
    assert _png_size(plotly_config("f", 820.4, 684)["toImageButtonOptions"]) == (1920, 1601)  # 684 × 1920 / 820


def _token_figure(n: int, height: int = 400) -> go.Figure:
    labels = [f"tok{i}" for i in range(n)]
    fig = go.Figure(go.Heatmap(z=RNG.random((3, n)), x=list(range(n)), y=[0, 1, 2]))
    fig.update_layout(xaxis=token_axis(labels), height=height, margin={"l": 60, "r": 20, "t": 50, "b": 90})
    return fig


@pytest.mark.parametrize("n", [5, 40, 512])
def test_thinned_token_labels_are_spaced_across_their_direction(n):
    width, font = 1000, 16
    fig = thin_ticks(_token_figure(n), width, font)
    axis = fig.layout.xaxis
    kept = list(axis.tickvals)
    area_w, _ = plot_area(fig, width, font)
    pitch = area_w / n * (kept[1] - kept[0]) if len(kept) > 1 else area_w
    angle = axis.tickangle or 0
    across = pitch * abs(np.sin(np.radians(angle))) if angle else pitch
    assert across >= TICK_PITCH * font or (angle == 0 and pitch >= max(text_width(t, font) for t in axis.ticktext))
    assert len(kept) == len(axis.ticktext) and kept[0] == 0  # every k-th, starting at the first token
    if n == 512:
        assert 1 < len(kept) < n


@pytest.mark.parametrize("n", [12, 128])
def test_token_categories_are_thinned_by_a_step_not_a_resent_list_of_labels(n):
    """A head's token axes are categories: the thinned labels are every k-th category from the first, which Plotly
    draws from ``tick0``/``dtick`` alone; a list would send every kept label twice more (``tickvals``, ``ticktext``)."""
    from viz.fit.page import fit_for_page
    from viz.fit.width import PAGE_FONT_PX

    labels = [f"tok{i}" for i in range(n)]
    fig = va.head_figure(RNG.random((n, n)).astype(np.float32) / n, labels, title="head", causal=False, colorscale="Viridis")
    fitted = fit_for_page(fig, 820)
    area_w, area_h = plot_area(fitted, 820, PAGE_FONT_PX)
    for name, length in (("xaxis", area_w), ("yaxis", area_h)):
        axis = fitted.layout[name]
        assert axis.type == "category" and axis.tickvals is None and axis.ticktext is None
        assert axis.tickmode == "linear" and axis.tick0 == 0 and axis.dtick >= 1
        drawn = labels[:: axis.dtick]  # the labels Plotly writes: categories 0, dtick, 2·dtick, …
        assert drawn[0] == "tok0" and (len(drawn) == n if n == 12 else 1 < len(drawn) < n)
        angle = abs(axis.tickangle or 0)
        across = length / n * axis.dtick * (np.sin(np.radians(angle)) if angle else 1)
        assert across >= TICK_PITCH * PAGE_FONT_PX or (name == "xaxis" and axis.dtick == 1)
    fitted.to_json()


def test_a_single_plot_gets_the_margins_its_labels_and_colour_bar_take_so_plotly_draws_it_once():
    """Plotly pushes a margin that is too small for the labels out after drawing, and then draws the whole figure again;
    page figures reserve the room up front (tests/browser/test_attention.py checks that Plotly pushes nothing)."""
    from viz.fit.page import fit_for_page, reserve_margins
    from viz.fit.width import PAGE_FONT_PX

    labels = [f"account{i}" for i in range(128)]
    head = va.head_figure(RNG.random((128, 128)).astype(np.float32) / 128, labels, title="h", causal=False,
                          colorscale="Viridis")
    assert fit_for_page(head, 820).layout.margin == head.layout.margin  # only when asked for
    fitted = fit_for_page(head, 820, reserve=True)
    margin = fitted.layout.margin
    widest = max(text_width(t, PAGE_FONT_PX) for t in labels[:: fitted.layout.yaxis.dtick])
    assert margin.l >= widest + 40 and margin.b >= widest + 40  # labels, the gap to them and the axis title
    assert margin.r >= 100  # the colour bar, its ticks and its title
    area_w, _ = plot_area(fitted, 820, PAGE_FONT_PX)
    assert area_w == pytest.approx(820 - margin.l - margin.r)  # the colour bar is counted once, in the margin
    # several plots, a legend or an aspect ratio to keep: left to Plotly
    grid = va.layer_grid_figure(RNG.random((4, 20, 20)), labels[:20], title="g", causal=False, colorscale="Viridis")
    overview = va.overview_figure(RNG.random((2, 3, 20, 20)), title="o", causal=False, colorscale="Viridis")
    for fig in (grid, overview):
        assert reserve_margins(copy_figure(fig), 820).layout.margin == fig.layout.margin


def test_few_long_category_labels_wrap_instead_of_turning():
    table = pd.DataFrame({
        "document": [0, 1, 0, 1],
        "comparison": ["hidden_states[0] vs hidden_states[6] (last layer)"] * 2
        + ["hidden_states[0] vs pooler_output (dense + tanh on the last [CLS] state)"] * 2,
        "cosine_similarity": [0.1, 0.2, 0.3, 0.4],
    })
    fig = fit_for_slide(cls_violin_figure(table, ["a", "b"], title="First token"), 600)
    assert fig.layout.xaxis.tickangle == 0
    assert all("<br>" in text for text in fig.layout.xaxis.ticktext)


def test_legend_goes_under_the_plot_and_titles_wrap():
    table = pd.DataFrame({"layer": [0, 1, 2], "knn_accuracy": [0.8, 1.0, 1.0], "silhouette": [0.2, 0.4, 0.5]})
    fig = fit_for_slide(separation_figure(table, 1), 320)
    assert fig.layout.legend.orientation == "h" and fig.layout.legend.yref == "container" and fig.layout.legend.y == 0
    assert "<br>" in fig.layout.title.text and fig.layout.title.automargin
    assert all(text_width(line, 12) <= 320 for t in fig.data for line in _lines(t.name))


def test_fitting_returns_a_copy():
    original = separation_figure(pd.DataFrame({"layer": [0, 1], "knn_accuracy": [1, 1], "silhouette": [0.1, 0.2]}))
    before = original.to_json()
    fit_for_slide(original, 300)
    assert original.to_json() == before


def _long_context_profile():
    """A made-up profile of 2 layers × 4 heads over 600 tokens, the first layer with a 512-token window."""
    from core.attention_heads.long_context import LongContextProfile, distance_edges

    edges = distance_edges(599)
    shares = RNG.random((2, 4, len(edges) - 1))
    return LongContextProfile(edges, shares / shares.sum(-1, keepdims=True), np.full((2, len(edges) - 1), 0.1), (0,),
                              RNG.random((2, 4, 600)), np.full((2, 600), 0.01), 512, RNG.random((2, 4)) / 2,
                              np.array([0.0, 0.1]), (512, None), True, tuple(range(600)))


def test_the_distance_figure_s_labels_are_thinned_or_turned_on_a_phone():
    """Issue 50: Long context at 390 × 844 drew its attention-by-distance labels flat and all of them, over each other:
    the figure set tickvals and ticktext but no tickmode (Plotly's default is then "array"), which the fitting read as
    labels Plotly places. By hand: the 11 labels ("0", "1", "2–3", … "512–599") hold 49 digits and dashes, each at
    least half a font size wide (6 px at 12 px): 294 px, more than the at most 240 px a 340-px column leaves between
    the figure's 80-px left and 20-px right margins, so they cannot all lie flat side by side."""
    from viz.fit.page import fit_for_page

    fig = distance_heatmap(_long_context_profile(), 0)
    assert fig.layout.xaxis.tickmode is None and len(fig.layout.xaxis.ticktext) == 11
    fitted = fit_for_page(fig, 340)
    assert fitted.layout.xaxis.tickangle in (-45, -90) or len(fitted.layout.xaxis.ticktext) < 11


def _depth_length_grid():
    from core.attention_heads.retrieval import DepthLengthGrid

    measured = np.ones((5, 4), dtype=bool)
    measured[-1, -1] = False
    return DepthLengthGrid((0.0, 0.25, 0.5, 0.75, 1.0), (256, 512, 1024, 2048), np.where(measured, RNG.random((5, 4)), np.nan),
                           RNG.random((5, 4)) > 0.5, np.full((5, 4), 300), measured)


def _every_figure(analysis) -> list[go.Figure]:
    labels = [f"t{i}" for i in range(analysis.num_tokens)]
    n = analysis.num_tokens
    att = analysis.attentions
    frame = pd.DataFrame({"layer": range(3), "cosine_similarity": [0.9, 0.8, 0.7]})
    drift = pd.DataFrame({"layer": [1, 1, 2, 2], "cosine_similarity": [0.9, 0.8, 0.7, 0.6], "document": [0, 1, 0, 1]})
    baseline = pd.DataFrame({"layer": [1, 2], "baseline": [0.5, 0.4], "anisotropy": [0.3, 0.2]})
    cls = pd.DataFrame({"comparison": ["a vs b"] * 2, "cosine_similarity": [0.5, 0.6], "document": [0, 1]})
    return [
        va.head_figure(att[0, 0], labels, title="head", causal=False, colorscale="Viridis"),
        va.layer_grid_figure(att[0], labels, title="layer", causal=True, colorscale="Viridis"),
        va.overview_figure(att, title="overview", causal=False, colorscale="Viridis"),
        attention_heatmap(att[0, 0], labels, title="Text A"),
        similarity_by_layer_chart(frame, "bank", 1.0),
        layer_violin_figure(drift, ["a", "b"], value="cosine_similarity", value_label="cosine", title="drift", baseline=baseline),
        cls_violin_figure(cls, ["a", "b"], title="cls"),
        head_heatmap(RNG.random((2, 4)), title="stat", colorbar="entropy"),
        head_heatmaps([RNG.random((2, 4))] * 2, titles=["a", "b"], colorbar="entropy"),
        component_bars(RNG.random(32), title="query", y_title="q"),
        token_bars(RNG.random(n), labels, title="row", y_title="attention", keep=np.arange(n) % 2 == 0),
        stacked_token_bars([("q·k", RNG.random(n), None), ("weight", RNG.random(n), np.arange(n) < 2)], labels, title="s"),
        matrix_heatmap(RNG.random((n, 8)), labels, title="keys", colorbar="k", symmetric=True),
        maxima_grid(attention_maxima(analysis, heads="max"), title="maxima"),
        attention_panels([("raw", att[0, 0]), ("rollout", att[1, 0])], labels),
        special_share_chart([0, 1], {"raw": np.array([0.5, 0.4]), "norm": np.array([0.2, 0.1])}),
        fill_in_bars(["bank", "river"], np.array([0.6, 0.3]), title="mask"),
        next_token_heatmap(labels, [["a", "b"]] * n, RNG.random((n, 2))),
        sense_projection_figure(RNG.random((4, 2)), ["river", "money", "river", ""], ["h"] * 4, title="senses", axis="PCA"),
        separation_figure(pd.DataFrame({"layer": [0, 1], "knn_accuracy": [1, 1], "silhouette": [0.1, 0.2]}), 0),
        token_layer_heatmap(RNG.random((3, n)), labels, title="home", colorbar="cosine"),
        route_figure(flow_graph(), labels, 2, title="route"),
        *(query_key_figure(RNG.random((8, 2)), ("a", "b", "a", "c"), ["h"] * 4, np.array([0, 1, 0, 1]), colour_by=colour,
                           title="queries and keys", axis="PCA", lines=(1, np.array([0, 1]), np.array([0.7, 0.3])))
          for colour in ("kind", "position", "token")),
        matrix_figure([(0, h, RNG.random((3, 2)), RNG.random((3, 2))) for h in range(4)], 4, title="every head"),
        *_long_figures(att, labels),
        distance_heatmap(_long_context_profile(), 0),
        sink_heatmap(_long_context_profile(), 1, "“The”"),
        grid_heatmap(_depth_length_grid()),
        room_map_figure(RNG.random((4, 2)), ["river", "money", "river", ""], ["h"] * 4, RNG.random((2, 2)),
                        ["the bank", "<b>bank</b>"], [(4, 8), (3, 7)], [True, False], title="room", axis="PCA"),
        vote_figure(np.array([[0, 2], [1, 0]]), None, None),
        vote_figure(np.array([[0, 2], [1, 0]]), RNG.random((2, 2)), 0.2),
    ]


def _long_figures(att: np.ndarray, labels: list[str]) -> list[go.Figure]:
    """The Attention page's figures for a long text (viz.long_heatmap), on the short text's weights."""
    n = att.shape[-1]
    reading = HeadReading(n, causal=False, window=None)
    reading.add(att[0, 0], np.arange(n))
    pixels = pixel_starts(n, 300)  # drawn as the page draws a head: on its plot's pixels (here more than tokens)
    pooled = PooledHead(pool(att[0, 0], pixels, pixels, "max"), pixels, pixels, n, "max", reading.done())
    zoomed = Zoom(att[0, 0, :4, :5], np.zeros((4, 5), dtype=bool), range(4), range(5), labels[:4], labels[:5])
    thumbs = Thumbnails(att[:, :, ::2], tuple(range(att.shape[0])), np.arange(0, n, 2), np.arange(n), n, "sum")
    return [lh.pooled_head_figure(pooled, title="pooled", colorscale="Viridis", region=(range(2), range(2))),
            lh.zoom_figure(zoomed, title="zoom", colorscale="Viridis"),
            lh.thumbnails_figure(thumbs, title="thumbnails", colorscale="Viridis")]


@pytest.mark.parametrize("width", [320, 600, 1232])
def test_every_figure_of_the_app_can_be_fitted(tiny_bert, width):
    analysis = analyze(tiny_bert, "The bank of the river was muddy after the long storm, said the banker.")
    for fig in _every_figure(analysis):
        fitted = fit_for_slide(fig, width, export_options(width)["height"])
        assert fitted.layout.font.size == slide_font_size(width)
        fitted.to_json()  # still a valid figure


@pytest.mark.parametrize("width", [320, 600, 1232])
def test_every_y_title_takes_at_most_two_lines_and_fits_its_axis(tiny_bert, width):
    """A y title is centred on its axis: longer than the axis, it reaches into the figure's title."""
    from viz.fit.page import fit_for_page
    from viz.fit.text import AXIS_TITLE_LINES
    from viz.fit.width import below_plot, plot_area, span_px

    analysis = analyze(tiny_bert, "The bank of the river was muddy after the long storm, said the banker.")
    for fig in _every_figure(analysis):
        for fitted, font_px in ((fit_for_slide(fig, width), slide_font_size(width)), (fit_for_page(fig, width), 12)):
            height = fitted.layout.height or 450
            area_w, _ = plot_area(fitted, width, font_px)
            area_h = height - fitted.layout.margin.t - below_plot(fitted, font_px)
            for name in [n for n in fitted.layout if n.startswith("yaxis") and fitted.layout[n].title.text]:
                axis = fitted.layout[name]
                lines = _lines(axis.title.text)
                longest = max(text_width(line, axis.title.font.size) for line in lines)
                if not axis.scaleanchor:
                    assert len(lines) <= AXIS_TITLE_LINES, (fig.layout.title.text, axis.title.text)
                assert longest <= span_px(fitted, name, area_w, area_h), (fig.layout.title.text, axis.title.text)


def test_a_legend_of_many_rows_makes_the_figure_taller_by_its_rows():
    """Issue 39: the route graph on a 12-head encoder has 14 legend entries (residual, MLP, one per top head); on a
    phone they fell below the figure. Each entry takes at least its 40 px symbol and 18 characters of at least
    0.32 font sizes (69 px): at most 3 fit in 358 px, so 14 take at least 5 rows of at least 16 px: 4 rows more."""
    from viz.fit.page import fit_for_page

    labels = [f"t{i}" for i in range(8)]
    edges = tuple(Edge(("block", h % 6 - 1, h % 8) if h % 6 else ("embedding", -1, h % 8), ("attention", h % 6, 2),
                       0.1 + h / 100, "attention", tuple(float(i == h) for i in range(12))) for h in range(12))
    edges += (Edge(("attention", 0, 2), ("block", 0, 2), 0.5, "residual"), Edge(("attention", 0, 2), ("mlp", 0, 2), 0.5, "mlp"))
    fig = route_figure(RouteGraph(2, 0.04, edges), labels, 6, title="route")
    assert len([t for t in fig.data if t.showlegend is not False and t.mode == "lines"]) == 14
    phone, laptop = fit_for_page(fig, 358), fit_for_page(fig, 1232)
    assert phone.layout.height >= (fig.layout.height or 450) + 4 * 16
    assert laptop.layout.height < phone.layout.height  # the same entries take fewer rows across a wide figure


def test_a_legend_of_several_rows_sets_its_title_above_them():
    """Issue 50: on a 1280 × 720 slide (a 1232-px figure, 20-px font) the route's 14 entries wrapped into rows at the
    plot's width, but Plotly set the rows right of the title beside them, so "head 4" ran to 1292 px. By hand: each
    entry takes its 40-px symbol and at least "head 1" (6 characters of at least 0.32 font sizes, 38 px), the 14 at
    least 1,100 px, and the title (30 characters) at least 190 px: more than one row of a 1232-px figure."""
    from viz.fit.page import fit_for_page

    labels = [f"t{i}" for i in range(8)]
    edges = tuple(Edge(("block", h % 6 - 1, h % 8) if h % 6 else ("embedding", -1, h % 8), ("attention", h % 6, 2),
                       0.1 + h / 100, "attention", tuple(float(i == h) for i in range(12))) for h in range(12))
    edges += (Edge(("attention", 0, 2), ("block", 0, 2), 0.5, "residual"), Edge(("attention", 0, 2), ("mlp", 0, 2), 0.5, "mlp"))
    fig = route_figure(RouteGraph(2, 0.04, edges), labels, 6, title="route")
    assert fig.layout.legend.title.side is None  # the wide frame leaves the title where Plotly puts it
    for fitted in (fit_for_slide(fig, 1232), fit_for_slide(fig, 1318), fit_for_page(fig, 820)):
        assert fitted.layout.legend.title.side == "top"
    # two short entries and the title fit one row of a full-HD slide: the title stays beside them
    two = route_figure(RouteGraph(2, 0.04, edges[-2:]), labels, 6, title="route")
    assert fit_for_slide(two, 1840).layout.legend.title.side in (None, "left")


def test_a_long_y_title_makes_a_short_figure_taller():
    from core.model.layers import HIDDEN_STATE_AXIS

    fig = token_layer_heatmap(RNG.random((7, 12)), [f"t{i}" for i in range(12)], title="home", colorbar="cosine")
    assert text_width(HIDDEN_STATE_AXIS, 20) > 2 * (fig.layout.height - 140)  # it could not fit in two lines as drawn
    fitted = fit_for_slide(fig, 1232)
    assert fitted.layout.height > fig.layout.height
    assert len(_lines(fitted.layout.yaxis.title.text)) == 2
    assert " ".join(_lines(fitted.layout.yaxis.title.text)) == HIDDEN_STATE_AXIS  # wrapped, never shortened


def test_colour_bar_titles_run_along_the_bar_at_the_page_size_too():
    """At the top of the bar (Plotly's default) the title sits on the top tick label."""
    from viz.fit.page import fit_for_page

    fitted = fit_for_page(head_heatmap(RNG.random((2, 4)), title="stat", colorbar="entropy"), 820)
    assert fitted.data[0].colorbar.title.side == "right" or fitted.layout.coloraxis.colorbar.title.side == "right"


def test_control_characters_in_labels_are_drawn_as_ascii_escapes():
    """A byte-level token may decode to a control character; XML (so SVG and PNG export) forbids it, and the bundled
    fonts lack the control pictures (U+2400…)."""
    from viz.common import plotly_safe

    assert plotly_safe("a\x14b\x00<\n") == "a\\x14b\\x00&lt;\\n"
    assert all(ord(c) >= 0x20 for c in plotly_safe("".join(map(chr, range(0x20)))))


def _as_json(fig: go.Figure) -> str:
    from plotly.utils import PlotlyJSONEncoder

    return json.dumps(fig.to_plotly_json(), cls=PlotlyJSONEncoder, sort_keys=True)


@pytest.mark.parametrize("width", [320, 940, 1232])
def test_fitting_writes_what_plotlys_validated_updates_would(tiny_bert, monkeypatch, width):
    """The fitting writes its results into the figure's dicts without Plotly's validation (half its cost on every
    click): the fitted figures must be exactly those Plotly's own updates give, on every figure the app draws."""
    from viz.fit.page import fit_for_page

    analysis = analyze(tiny_bert, "The bank of the river was muddy after the long storm, said the banker.")
    labels128 = [f"tok{i}" for i in range(128)]
    figures = _every_figure(analysis) + [
        va.head_figure(RNG.random((128, 128)).astype(np.float32), labels128, title="a 128-token head", causal=False,
                       colorscale="Blues"),
        va.layer_grid_figure(RNG.random((4, 40, 40)).astype(np.float32), labels128[:40], title="grid", causal=False,
                             colorscale="Blues"),
    ]
    for fig in figures:
        fits = {}
        for validated in (True, False):
            monkeypatch.setattr(reading, "VALIDATE_WRITES", validated)
            fits[validated] = [_as_json(fit_for_page(fig, width)), _as_json(fit_for_page(fig, width, reserve=True)),
                               _as_json(fit_for_slide(fig, width, export_options(width)["height"]))]
        assert fits[False] == fits[True], fig.layout.title.text
