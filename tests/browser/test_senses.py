"""The senses page in a real browser: the projection and the separation chart paint, the layer
slider and links change the view, UMAP works, and typed sentences are shown as text."""

from __future__ import annotations

import pytest

from core.representations.senses import builtin_set

pytestmark = pytest.mark.browser

PROJECTION = ".js-plotly-plot"  # the first figure on the page is the projection
# Every figure's traces as Plotly holds them: (trace name, number of points, hover customdata).
FIGURE_DATA = """(index) => {
    const plot = document.querySelectorAll('.js-plotly-plot')[index];
    return plot.data.map((t, i) => [t.name, plot.calcdata[i].length, t.customdata || []]);
}"""


def _title(page) -> str:
    """The projection's title as read: a title wrapped onto several lines (``tspan.line``) joined by spaces."""
    return page.locator(f"{PROJECTION} .gtitle").first.evaluate(
        "el => { const lines = [...el.querySelectorAll('tspan.line')];"
        " return lines.length ? lines.map(t => t.textContent).join(' ') : el.textContent; }")


def test_built_in_bank_set_paints_both_senses_and_the_separation_by_layer(app_page):
    page = app_page.open("senses", {"word": "bank", "method": "PCA", "layer": "0"})
    page.wait_for_selector(f"{PROJECTION} .scatterlayer .point", timeout=120_000)
    assert page.locator(".js-plotly-plot").count() == 2
    projection = page.evaluate(FIGURE_DATA, 0)
    # the sidebar's default sentence has "bank", so it is placed on the map as its own marker
    assert [(name, n) for name, n, _ in projection] == [("money", 12), ("river", 12), ("your sentence", 1)]
    assert page.locator(PROJECTION).first.locator(".scatterlayer .point").count() == 25
    hovers = [row[1] for row in projection[1][2]]
    # a hover may add "(drawn as one point with k identical others)": layer 0 repeats token + position vectors
    river = [s for s, sense in zip(*builtin_set("bank")) if sense == "river"]
    assert any("<b>" in h and h.replace("<b>", "").replace("</b>", "").startswith(river[0]) for h in hovers)
    assert "hidden state 0 (embedding layer output)" in _title(page)
    separation = page.evaluate(FIGURE_DATA, 1)
    assert sum(1 for _, n, _ in separation if n == 7) >= 2  # hidden states 0..6 of all-MiniLM-L6-v2, two measures
    assert page.get_by_text("Download data (CSV)").count() >= 2
    app_page.assert_clean()


def test_the_layer_slider_moves_the_view_and_the_link(app_page):
    page = app_page.open("senses", {"word": "bass", "method": "PCA"})
    page.wait_for_selector(f"{PROJECTION} .scatterlayer .point", timeout=120_000)
    assert "hidden state 6 (output of layer 5):" in _title(page)
    before = page.evaluate(FIGURE_DATA, 0)
    slider = page.locator('[data-testid="stSlider"] input[type="range"]')
    slider.focus()
    slider.press("ArrowLeft")
    page.wait_for_function("() => location.search.includes('layer=5')")
    app_page.wait_until_idle()
    page.wait_for_function("() => document.querySelector('.js-plotly-plot .gtitle').textContent.replace(/\\s+/g, '')"
                       ".includes('hiddenstate5(outputoflayer4):')")
    after = page.evaluate(FIGURE_DATA, 0)
    assert [row[2] for row in after] == [row[2] for row in before]  # the same occurrences, projected again
    app_page.assert_clean()


def test_umap_paints(app_page):
    page = app_page.open("senses", {"word": "seal", "method": "UMAP", "layer": "3"}, timeout_ms=400_000)
    page.wait_for_selector(f"{PROJECTION} .scatterlayer .point", timeout=400_000)
    assert "UMAP of 24 occurrences" in _title(page)
    assert page.locator(PROJECTION).first.locator(".scatterlayer .point").count() == 24
    app_page.assert_clean()


def test_typed_sentences_are_shown_as_text(app_page):
    page = app_page.open("senses", {"word": "bank", "method": "PCA", "source": "Your sentences"})
    box = page.locator('[data-testid="stMain"] textarea')
    box.fill(
        "money: <img src=x onerror=alert(1)> bank\nmoney: the bank & co\n"
        "river: a bank <b>of</b> mud\nriver: the bank of a river\nno word here"
    )
    box.press("Control+Enter")
    app_page.wait_until_idle()
    page.wait_for_selector("text=1 sentence(s) without")
    page.wait_for_selector(f"{PROJECTION} .scatterlayer .point", timeout=120_000)
    hovers = [row[1] for trace in page.evaluate(FIGURE_DATA, 0) for row in trace[2]]
    assert "&lt;img src=x onerror=alert(1)&gt; <b>bank</b>" in hovers
    assert "a <b>bank</b> &lt;b&gt;of&lt;/b&gt; mud" in hovers
    assert page.locator(f"{PROJECTION} img").count() == 0
    app_page.assert_clean()
