"""Figures on a narrow screen (issue 28): fitted to the main column the browser measured, side-by-side panels stacked
on a phone, in-cell numbers dropped when cells are too small, titles of several lines clear of the plot.

The browser half (every page at 1024 × 768 and 390 × 844) is tests/browser/test_slides.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from streamlit.testing.v1 import AppTest

from ui.viewport import MainColumn
from viz import attention as va
from viz.compare import similarity_by_layer_chart
from viz.fit.page import MODEBAR_PX, fit_for_page
from viz.fit.text import LINE_HEIGHT, line_count
from viz.fit.width import hide_cramped_cell_text, plot_area
from viz.maxima import attention_panels

LABELS = ["[CLS]", "I", "will", "hike", "along", "the", "bank", "of", "a", "river", ".", "[SEP]"]
RNG = np.random.default_rng(3)


def test_a_figure_in_a_column_gets_its_share_of_the_column_less_the_gaps():
    column = MainColumn(560)
    assert column.figure_width(1.0, 16) == 560
    assert column.figure_width(0.5, 16) == pytest.approx((560 - 16) / 2)  # two columns, one gap
    assert column.figure_width(1 / 3, 16) == pytest.approx((560 - 32) / 3)  # three, two gaps
    assert column.figure_width(0.6, 64) == pytest.approx((560 - 64) * 0.6)  # beside([2, 3]) with its large gap
    assert MainColumn(340, stacked=True).figure_width(0.5, 16) == 340  # a phone stacks the columns
    assert str(MainColumn(340, stacked=True)) == "340 stacked" and str(MainColumn(820)) == "820"


def _head(width_px: float):
    fig = va.head_figure(RNG.random((12, 12)), LABELS, title="all-MiniLM-L6-v2 · layer 0, head 0", causal=False,
                         colorscale="Cividis")
    return fit_for_page(fig, width_px, reserve=True)


def test_cell_numbers_are_dropped_only_where_cells_are_too_small_for_them():
    assert _head(820).data[0].texttemplate, "a 12-token head at 820 px has room for its numbers"
    assert not _head(340).data[0].texttemplate, "on a phone the 12 cells are about 10 px wide: no 3-pixel digits"


def test_dropping_cell_numbers_is_decided_by_the_cells_own_size():
    fig = va.head_figure(RNG.random((4, 4)), LABELS[:4], title="t", causal=False, colorscale="Cividis")
    assert hide_cramped_cell_text(fig, 340, 12).data[0].texttemplate, "four cells fit a phone"
    area_w, _ = plot_area(fig, 340, 12)
    assert area_w / 4 > 30


def test_a_title_of_several_lines_is_lifted_clear_of_the_plot():
    one_line, two_lines = _head(820), _head(340)
    assert line_count(one_line.layout.title.text) == 1 and line_count(two_lines.layout.title.text) == 2
    # the extra line hangs under the pad in Chromium: the pad grows by that line and the top margin with it
    title_px = two_lines.layout.title.font.size
    assert two_lines.layout.title.pad.b - one_line.layout.title.pad.b >= LINE_HEIGHT * title_px - 1
    assert two_lines.layout.margin.t >= two_lines.layout.title.pad.b + 2 * LINE_HEIGHT * title_px


def test_three_panels_stack_on_a_phone_and_keep_their_query_labels():
    panels = [(f"panel {i}", RNG.random((12, 12))) for i in range(3)]
    side, stacked = attention_panels(panels, LABELS), attention_panels(panels, LABELS, stacked=True)
    assert len({tuple(side.layout[f"xaxis{s}"].domain) for s in ("", "2", "3")}) == 3
    assert len({tuple(stacked.layout[f"yaxis{s}"].domain) for s in ("", "2", "3")}) == 3
    assert all(stacked.layout[f"yaxis{s}"].showticklabels for s in ("", "2", "3"))
    assert stacked.layout.height == 3 * side.layout.height


def test_a_word_too_wide_for_its_panel_shrinks_the_panel_title():
    panels = [("norm-weighted, layer 0 (share of row)", RNG.random((12, 12)))] * 3
    narrow = fit_for_page(attention_panels(panels, LABELS), 340)
    assert all(9 <= a.font.size < 16 for a in narrow.layout.annotations)
    assert all(a.font.size == 16 for a in fit_for_page(attention_panels(panels, LABELS), 1600).layout.annotations)


def test_the_lookup_line_label_has_room_inside_the_plot():
    frame = {"layer": list(range(7)), "cosine_similarity": [0.95, 0.8, 0.8, 0.78, 0.8, 0.82, 0.72]}
    fig = similarity_by_layer_chart(pd.DataFrame(frame), "bank", 1.0)
    low, high = fig.layout.yaxis.range
    assert high - 1.0 >= 0.15 * (1.05 - low) - 1e-9


def test_31_layer_ticks_are_thinned_on_a_phone():
    """Issue 40, item 14: on SmolLM2 (31 hidden states) at 390 × 844 Compare's x labels overlapped. ``copy_figure``
    writes numpy coordinates in Plotly's typed-array form, which the tick reading took for one value: no thinning."""
    frame = pd.DataFrame({"layer": np.arange(31), "cosine_similarity": np.linspace(1.0, 0.6, 31)})
    fitted = fit_for_page(similarity_by_layer_chart(frame, "bank", 1.0, frame), 340)
    axis = fitted.layout.xaxis
    step, angle = axis.dtick, axis.tickangle or 0
    # Neighbouring labels stand at least this far apart even if margins took 150 of the 340 px; a label takes the
    # width of "30" in 12-px digits (2 × 0.6 × 12 px) lying flat, a line of 12-px text (14 px) turned upright.
    pitch = (340 - 150) / 31 * step
    assert pitch >= (14 if abs(angle) == 90 else 15), (step, angle, pitch)
    assert abs(angle) == 90 or step >= 3


def test_cell_numbers_of_a_numpy_heatmap_are_dropped_when_cramped_too():
    """The same typed-array form hid a numpy ``z`` from ``hide_cramped_cell_text``: 30 columns of digits on a phone."""
    fig = go.Figure(go.Heatmap(z=RNG.random((5, 30)), texttemplate="%{z:.2f}"))
    assert not fit_for_page(fig, 340).data[0].texttemplate
    assert fit_for_page(go.Figure(go.Heatmap(z=RNG.random((5, 4)), texttemplate="%{z:.2f}")), 340).data[0].texttemplate


def test_the_overview_of_30_layers_on_a_phone_has_no_empty_band_around_its_square_cells():
    """Issue 40, item 14: SmolLM2's 30 × 9 overview kept its 1600-px height on a phone, where its square cells take
    about 830 px: Plotly centred them and left about 280 px empty above and below."""
    matrices = RNG.random((30, 9, 16, 16))
    fig = va.overview_figure(matrices, title="SmolLM2-135M-Instruct: raw attention weights, every layer × head",
                             causal=True, colorscale="Cividis")
    fitted = fit_for_page(fig, 340)
    (x0, x1), (y0, y1) = fig.layout.xaxis.range, fig.layout.yaxis.range
    widest_plot = 340 - 70 - 20  # the figure's own side margins: the cells are at most this wide
    cells_px = widest_plot * abs(y1 - y0) / abs(x1 - x0)
    band = fitted.layout.height - fitted.layout.margin.t - 50 - cells_px  # 50: the bottom margin, at least
    assert band <= 120, (fitted.layout.height, fitted.layout.margin.t, cells_px)
    assert fitted.layout.height - fitted.layout.margin.t - 110 >= 0.8 * cells_px  # the cells are not squeezed
    desktop = fit_for_page(fig, 820).layout  # a desktop column: the height the cells take, and the toolbar's room
    assert desktop.height == fig.layout.height + (MODEBAR_PX if desktop.margin.t >= fig.layout.margin.t + MODEBAR_PX else 0)


def test_a_colour_bar_is_set_a_few_pixels_right_of_where_plotly_puts_it():
    fitted = _head(274)
    bars = [t.colorbar.x for t in fitted.data if t.type == "heatmap"] + [fitted.layout.coloraxis.colorbar.x]
    assert any(x is not None and x > 1.02 for x in bars)


@pytest.mark.app
def test_the_app_mounts_the_column_probe_and_fits_figures_to_the_assumed_width_without_a_browser():
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=180)
    at.run()
    assert not at.exception
    alts = [e.body for e in at.get("html") if "figure-alt" in str(getattr(e, "body", ""))]
    assert alts and all('data-main-column="820"' in body for body in alts)


def test_the_top_next_tokens_heatmap_keeps_its_cells_wide_on_a_phone():
    """Issue 40, item 14: at 390 × 844 the heatmap's cells had ~110 px (colour bar, a title wrapped in four lines)."""
    from viz.predictions import next_token_heatmap

    context = ["Yesterday", "·my", "·grandmother", "·went", "·to", "·the", "·market"]
    candidates = [[f"·w{i}{r}" for r in range(5)] for i in range(len(context))]
    probabilities = RNG.dirichlet(np.ones(6), size=len(context))[:, :5]
    wide = fit_for_page(next_token_heatmap(context, candidates, probabilities), 340)
    narrow = fit_for_page(next_token_heatmap(context, candidates, probabilities, narrow=True), 340)
    assert narrow.data[0].showscale is False and wide.data[0].showscale is not False
    assert line_count(narrow.layout.xaxis.title.text) == 1
    assert plot_area(narrow, 340, 12)[0] >= 2.5 * plot_area(wide, 340, 12)[0]  # 178 px against 63 here
    assert plot_area(narrow, 340, 12)[0] >= 160
