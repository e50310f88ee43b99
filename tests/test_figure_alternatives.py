"""Every figure has a text alternative (WCAG 1.1.1): a visually hidden sentence just before it, in the same gapless
container, built from the page's own sentence and what the figure names itself (ui.figures.text_alternative)."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from tests.pages_registry import landed_pages
from tests.test_app import open_app, page_errors
from ui.figures import text_alternative


def test_the_alternative_names_the_sentence_title_axes_and_colour():
    fig = go.Figure(go.Heatmap(z=[[1, 2], [3, 4]], colorbar={"title": {"text": "weight"}}))
    fig.update_layout(title="Layer 0, head 1<br><sup>raw attention</sup>", xaxis_title="key", yaxis_title="query")
    assert text_alternative(fig, "head 1 attends to the previous token.") == (
        "Head 1 attends to the previous token. Heatmap chart: Layer 0, head 1 raw attention. Horizontal axis: key. "
        "Vertical axis: query. Colour: weight.")


def test_panels_are_named_and_an_empty_figure_says_so():
    fig = make_subplots(rows=1, cols=2, subplot_titles=["Text A", "Text B"])
    fig.add_scatter(y=[1, 2])
    fig.add_bar(y=[2, 1], row=1, col=2)
    assert text_alternative(fig) == "Bar and scatter chart. Panels: Text A; Text B."
    assert text_alternative(go.Figure()) == "Empty chart."


def alternatives_and_charts(node) -> list[str]:
    """In page order: "alt" for each figure's hidden alternative, "chart" for each figure."""
    found = []
    if getattr(node, "type", "") == "html" and 'class="figure-alt"' in node.proto.body:
        found.append("alt")
    elif getattr(node, "type", "") == "plotly_chart":
        found.append("chart")
    for _, child in sorted(getattr(node, "children", {}).items()):
        found += alternatives_and_charts(child)
    return found


@pytest.mark.app
@pytest.mark.parametrize("page", [file for file, _ in landed_pages()])
def test_every_figure_on_every_page_follows_its_text_alternative(page, tiny_gpt2_dir):
    at = open_app({"model": tiny_gpt2_dir}, page=page)
    assert not page_errors(at)
    order = alternatives_and_charts(at.main)
    assert order == ["alt", "chart"] * (len(order) // 2), order
