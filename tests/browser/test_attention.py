"""The attention page in a real browser: every view paints, BertViz works offline, typed text never runs."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

TEXT = "The cat sat on the mat."
ATTACK = "</script><img src=x onerror=alert(1)> the cat"
IFRAME = 'iframe[data-testid="stIFrame"], [data-testid="stIFrame"] iframe'


def _texts(locator) -> list[str]:
    """textContent of every match (SVG text has no innerText)."""
    return locator.evaluate_all("els => els.map(e => e.textContent)")


def _bertviz_svg_elements(page) -> int:
    """Number of drawn SVG shapes inside the BertViz iframe once it has painted."""
    frame = page.frame_locator(IFRAME).first
    frame.locator("#vis svg").first.wait_for(timeout=60_000)
    shapes = "#vis svg line, #vis svg rect, #vis svg text"
    return frame.locator(shapes).count()


def test_overview_and_large_head_paint(app_page):
    page = app_page.open("attention", {"text": TEXT, "layer": "2", "head": "3"})
    page.wait_for_selector(".js-plotly-plot .imagelayer image", timeout=60_000)  # the overview mosaic
    # the large head: the head switch's canvas (tests/browser/test_head_switch.py checks its every cell)
    switch = page.locator('[data-testid="stMain"] .head-switch')
    switch.locator(".title", has_text="Layer 2, head 3").wait_for(timeout=60_000)
    assert switch.locator('canvas[role="img"]').get_attribute("data-head") == "3"
    titles = _texts(page.locator(".js-plotly-plot .gtitle"))  # its Plotly figure is built only for its downloads
    assert titles and not any("layer 2, head 3" in t for t in titles), titles
    app_page.assert_clean()


# The overview's title lines and Plotly's toolbar over its top right corner, as drawn (the toolbar shown by hovering).
TITLE_AND_TOOLBAR_JS = """() => {
    const chart = document.querySelector('[data-testid="stMain"] [data-testid="stPlotlyChart"]');
    const box = (el) => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    return {title: [...chart.querySelectorAll('.gtitle tspan.line, .gtitle')].map(box),
            toolbar: [...chart.querySelectorAll('.modebar-group')].map(box)};
}"""


def test_the_overview_title_is_clear_of_the_toolbar_on_a_phone(app_page):
    """Issue 40, item 14: at 390 × 844 the overview's title ran under Plotly's toolbar (shown on hover, and always
    on a touch screen)."""
    from tests.browser.slide_checks import REFITTED_JS

    app_page.page.set_viewport_size({"width": 390, "height": 844})
    page = app_page.open("attention", {"text": TEXT})
    page.wait_for_function(REFITTED_JS, timeout=60_000, polling=100)
    app_page.wait_until_idle()
    chart = page.locator('[data-testid="stMain"] [data-testid="stPlotlyChart"]').first
    chart.scroll_into_view_if_needed()
    chart.hover(position={"x": 200, "y": 300})
    page.wait_for_function("() => [...document.querySelectorAll('.modebar')].some(m => getComputedStyle(m).opacity === '1')")
    drawn = page.evaluate(TITLE_AND_TOOLBAR_JS)
    assert drawn["title"] and drawn["toolbar"], drawn
    meets = [(t, b) for t in drawn["title"] for b in drawn["toolbar"]
             if t[0] < b[2] and b[0] < t[2] and t[1] < b[3] and b[1] < t[3]]
    assert not meets, meets
    app_page.assert_clean()


def test_layer_grid_paints_every_head(app_page):
    page = app_page.open("attention", {"text": TEXT, "view": "one layer", "layer": "1"})
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=60_000)
    titles = _texts(page.locator(".js-plotly-plot .annotation-text"))
    assert {f"head {h}" for h in range(12)} <= set(titles), titles  # the bundled model has 12 heads
    app_page.assert_clean()


@pytest.mark.parametrize("kind", ["head", "model", "neuron"])
def test_bertviz_views_draw_offline(app_page, kind):
    """Every non-localhost request is blocked by the fixture: the view must draw from inlined scripts."""
    page = app_page.open("attention", {"text": TEXT, "view": "BertViz", "bertviz": f"{kind} view"})
    assert "view=BertViz" in page.url, page.url
    assert _bertviz_svg_elements(page) > 20
    frame = page.frame_locator(IFRAME).first
    texts = _texts(frame.locator("#vis svg text"))
    # the model view writes tokens only in the detail of a clicked thumbnail
    assert any("cat" in t for t in texts) if kind != "model" else {"Layers", "Heads"} <= set(texts), texts
    app_page.assert_clean()


@pytest.mark.parametrize("query", [{}, {"view": "one layer"}, {"view": "BertViz", "bertviz": "head view"},
                                   {"view": "BertViz", "bertviz": "model view"}, {"view": "BertViz", "bertviz": "neuron view"},
                                   {"view": "BertViz", "bertviz": "head view", "words": "true"}])
def test_typed_markup_never_runs(app_page, query):
    page = app_page.open("attention", {"text": ATTACK, **query})
    # no option was dropped as invalid (a default value, such as the head view, is left out of the URL)
    assert all(f"{key}=" in page.url for key, value in query.items() if value != "head view"), page.url
    page.wait_for_selector(".js-plotly-plot", timeout=60_000)
    if query.get("view") == "BertViz":
        assert _bertviz_svg_elements(page) > 0
        frame = page.frame_locator(IFRAME).first
        assert frame.locator("img").count() == 0
        # the markup is drawn as text, character for character
        if query["bertviz"] != "model view":
            drawn = "".join(_texts(frame.locator("#vis svg text")))
            assert "script" in drawn and "<" in drawn
    page.wait_for_timeout(500)  # give an injected handler the chance to fire
    assert page.locator("img[src='x']").count() == 0
    assert app_page.dialogs == []
    app_page.assert_clean()


HOVERED = """(title) => {
    const gd = [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')]
        .find(el => [...el.querySelectorAll('.gtitle')].some(t => t.textContent.replace(/\\s+/g, '').includes(title.replace(/\\s+/g, ''))));
    const trace = gd._fullData.find(t => t.type === 'heatmap' && (t.hovertemplate || '').includes('→'));
    const box = gd.querySelector('.nsewdrag').getBoundingClientRect();
    return {box: {x: box.x, y: box.y, width: box.width, height: box.height}, template: trace.hovertemplate,
            rows: trace.y.length, cols: trace.x.length, x: [...trace.x], y: [...trace.y],
            z: [...trace.z].map(row => [...row]), numbers: Array.isArray(trace.z[0])};
}"""


ROLLOUT_HEAD = "layer 2, all heads (rollout)"  # the one-head view that draws the Plotly head figure (no switch)


def _open_head(app_page, text: str) -> tuple:
    """/attention on ``text``, rollout at layer 2, its head figure in view: (page, the figure as the browser holds it)."""
    page = app_page.open("attention", {"text": text, "layer": "2", "source": "rollout"})
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=60_000)
    figure = page.locator('[data-testid="stMain"] .js-plotly-plot').filter(has_text=ROLLOUT_HEAD)
    figure.locator(".nsewdrag").first.scroll_into_view_if_needed()
    return page, page.evaluate(HOVERED, ROLLOUT_HEAD)


def _hovered(page, spec: dict, cells: list[tuple[int, int]]):
    """Hover each (row, column) cell; yields what the hover prints after ``: `` and the z the browser holds for the
    cell the hover names by its labels."""
    box = spec["box"]
    for i, j in cells:
        page.mouse.move(box["x"] + (j + 0.5) * box["width"] / spec["cols"], box["y"] + (i + 0.5) * box["height"] / spec["rows"])
        hover = page.locator(".hoverlayer .hovertext").first
        hover.wait_for(timeout=10_000)
        shown = hover.text_content().replace("\u00a0", " ")
        query, rest = shown.split(" → ")
        key, value = rest.rsplit(": ", 1)
        yield value, spec["z"][spec["y"].index(query)][spec["x"].index(key)]


def test_head_hover_reads_the_weight_the_browser_decoded(app_page):
    """Past CELL_TEXT_MAX tokens the head figure sends integer codes: the hover prints ``0.<code>`` with the
    hover's digits (viz.attention.decimal_codes; tests/test_viz_attention_bytes.py proves code = weight rounded).
    Up to 128 tokens the codes arrive as JSON numbers (viz.attention.codes_as_numbers), not a typed array."""
    page, spec = _open_head(app_page, "The cat sat on the mat because it was tired and the dog ran to the park with a ball.")
    assert spec["template"] == "%{y} → %{x}: 0.%{z:04d}<extra></extra>" and spec["cols"] > 20
    assert spec["numbers"]  # rows of plain numbers: the JSON encoding, not a decoded typed array
    for value, code in _hovered(page, spec, [(1, 2), (spec["rows"] - 2, 0), (spec["rows"] // 2, spec["cols"] // 2)]):
        assert int(code) < 10_000 and value == f"0.{int(code):04d}", (value, code)
    app_page.assert_clean()


CELL_TEXTS = """(title) => {
    const gd = [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')]
        .find(el => [...el.querySelectorAll('.gtitle')].some(t => t.textContent.replace(/\\s+/g, '').includes(title.replace(/\\s+/g, ''))));
    return [...gd.querySelectorAll('.heatmaplayer text')].map(t => t.textContent);
}"""


def _to_fixed(number: float, digits: int) -> str:
    """The browser's toFixed (d3-format's ``f``): the number's exact value rounded half up."""
    from decimal import ROUND_HALF_UP, Decimal

    return str(Decimal(number).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def test_short_head_prints_its_json_numbers_in_hover_and_cells(app_page):
    """Up to CELL_TEXT_MAX tokens the head's weights arrive as JSON numbers (viz.attention.printed_numbers, which
    tests/test_viz_attention_bytes.py proves print as the true weights): the hover prints each at 4 decimals and
    its cell at 2, read back from the page cell by cell."""
    page, spec = _open_head(app_page, "The cat sat on the mat near the river bank.")
    assert spec["template"] == "%{y} → %{x}: %{z:.4f}<extra></extra>" and spec["cols"] <= 20
    assert spec["numbers"]  # plain numbers: the JSON encoding, not a decoded typed array
    cells = page.evaluate(CELL_TEXTS, ROLLOUT_HEAD)
    assert cells == [_to_fixed(v, 2) for row in spec["z"] for v in row]  # every cell's text, in drawing order
    for value, number in _hovered(page, spec, [(0, 0), (1, 2), (spec["rows"] - 2, 0), (spec["rows"] // 2, spec["cols"] // 2)]):
        assert value == _to_fixed(number, 4), (value, number)
    app_page.assert_clean()


DRAWN_MARGINS = """(title) => {
    const gd = [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')]
        .find(el => [...el.querySelectorAll('.gtitle')].some(t => t.textContent.replace(/\\s+/g, '').includes(title.replace(/\\s+/g, ''))));
    const full = gd._fullLayout;
    return {asked: {l: full.margin.l, r: full.margin.r, b: full.margin.b}, drawn: {l: full._size.l, r: full._size.r, b: full._size.b},
            yLabels: [...gd.querySelectorAll('.ytick text')].map(t => t.textContent)};
}"""


@pytest.mark.parametrize("words", [8, 60])
def test_head_figure_is_drawn_once_in_the_margins_the_server_reserved(app_page, words):
    """Plotly redraws a whole figure when its tick labels, axis titles or colour bar push a margin out
    (viz.fit.page.reserve_margins sets them up front): the margins drawn are the ones asked for."""
    text = " ".join(["The cat sat on the mat because it was tired."] * (words // 10 + 1)).split()[:words]
    page = app_page.open("attention", {"text": " ".join(text), "layer": "1", "source": "rollout"})
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=60_000)
    drawn = page.evaluate(DRAWN_MARGINS, "layer 1, all heads (rollout)")
    assert drawn["drawn"] == drawn["asked"], drawn  # nothing pushed: drawn once
    figure = page.locator('[data-testid="stMain"] .js-plotly-plot').filter(has_text="layer 1, all heads (rollout)")
    buttons = figure.locator(".modebar-btn").evaluate_all("els => els.map(e => e.getAttribute('data-title'))")
    assert any(b and b.startswith("Download plot") for b in buttons), buttons  # the camera button stays
    assert not {"Box Select", "Lasso Select"} & set(buttons) and figure.locator(".modebar a[href*='plotly']").count() == 0
    assert len(drawn["yLabels"]) > 1 and "cat" in " ".join(drawn["yLabels"])  # tokens still name the rows
    app_page.assert_clean()
