"""The Queries and keys page in Chromium, on a tiny recorded Llama: the map paints with escaped hostile tokens, a
click on a query draws its lines and goes into the link, and a click on a small multiple opens that head."""

from __future__ import annotations

import pytest

from tests.lm_factory import build_tiny_llama_lm
from tests.pages_registry import landed_pages

pytestmark = pytest.mark.browser

HOSTILE = "<img src=x onerror=alert(1)>"
DOCS = f"The cat sat on the mat. {HOSTILE}\n\nI will hike along the bank of a river with my dog."
FIGURE_DATA = """(index) => {
    const plot = document.querySelectorAll('.js-plotly-plot')[index];
    return plot.data.map((t, i) => [t.name, plot.calcdata[i].length, t.customdata || []]);
}"""
# The centre, in page pixels, of the drawn point of trace ``trace`` of figure ``figure`` farthest from every point of
# the figure's other traces, so a click on it can only hit that point (Plotly picks the closest point); the figure
# is scrolled into the window first.
LONELY_POINT = """([figure, trace]) => {
    const plot = document.querySelectorAll('.js-plotly-plot')[figure];
    plot.scrollIntoView({block: 'center'});
    const traces = [...plot.querySelectorAll('.scatterlayer .trace')];
    const centre = p => { const b = p.getBoundingClientRect(); return [b.x + b.width / 2, b.y + b.height / 2]; };
    const mine = [...traces[trace].querySelectorAll('.point')].map(centre);
    const others = traces.filter((_, i) => i !== trace).flatMap(t => [...t.querySelectorAll('.point')].map(centre));
    let best = null, bestGap = -1;
    for (const [x, y] of mine) {
        const gap = Math.min(...others.map(([u, v]) => Math.hypot(u - x, v - y)), 1e9);
        if (gap > bestGap) { best = [x, y]; bestGap = gap; }
    }
    return best;
}"""


@pytest.fixture(scope="module")
def tiny_llama_dir(tmp_path_factory) -> str:
    return str(build_tiny_llama_lm(tmp_path_factory.mktemp("models") / "qk-llama"))


def test_map_click_and_matrix(app_page, tiny_llama_dir):
    page = app_page.open("qk-map", {"model": tiny_llama_dir, "corpus": "Your documents", "docs": DOCS,
                                    "layer": "1", "head": "1"})
    page.wait_for_selector(".js-plotly-plot .scatterlayer .point", timeout=120_000)
    app_page.wait_until_drawn()
    assert page.locator(".js-plotly-plot").count() == 2
    # past twelve pages Streamlit's navigation would hide the last ones behind "View more" unless told not to
    assert page.locator('[data-testid="stSidebarNav"] a').count() == len(landed_pages())
    traces = page.evaluate(FIGURE_DATA, 0)
    assert [name for name, _, _ in traces] == ["queries", "keys"]
    queries = traces[0][2]
    n = len(queries)
    assert traces[0][1] == traces[1][1] == n > 20
    # hostile tokens reach the hovers escaped, and nothing was interpreted: no <img> in the figure, no dialog
    hovers = " ".join(row[2] for row in queries)
    assert "&lt;" in hovers and "<img" not in hovers
    assert page.locator(".js-plotly-plot img").count() == 0

    # a click on a query: lines to the keys it attends to most, and the query goes into the link
    x, y = page.evaluate(LONELY_POINT, [0, 0])
    page.mouse.click(x, y)
    page.wait_for_function("() => new URLSearchParams(location.search).has('query')", timeout=60_000)
    app_page.wait_until_idle()
    page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')][0].data"
                           ".some(t => t.name === 'chosen query')", timeout=60_000)
    chosen = int(page.evaluate("() => new URLSearchParams(location.search).get('query')"))
    drawn = page.evaluate(FIGURE_DATA, 0)
    assert [row[2][0][0] for row in drawn if row[0] == "chosen query"] == [chosen]
    assert page.get_by_text("attends most to").count() == 1

    # the matrix: one panel per head of layer 1 (queries and keys); a click on head 3's panel opens head 3
    matrix = page.evaluate(FIGURE_DATA, 1)
    assert [row[2][0] for row in matrix[::2]] == [[1, h] for h in range(4)]
    x, y = page.evaluate(LONELY_POINT, [1, 6])  # panel 3: traces 6 (queries) and 7 (keys)
    page.mouse.click(x, y)
    page.wait_for_function("() => new URLSearchParams(location.search).get('head') === '3'", timeout=60_000)
    app_page.wait_until_idle()
    page.wait_for_function("() => /head\\s*3(?!\\d)/.test(document.querySelector('.js-plotly-plot .gtitle').textContent)",
                           timeout=60_000)
    assert not page.evaluate("() => new URLSearchParams(location.search).has('query')")  # a new head, no query
    app_page.assert_clean()


# Every button of the page's segmented controls: whether its text fits it and it fits the column it stands in.
BUTTONS = """[...document.querySelectorAll('[data-testid="stMain"] [data-testid="stButtonGroup"] button')]"""
CLIPPED_OPTIONS = """() => BUTTONS
    .filter(b => { const box = b.getBoundingClientRect();
                   const column = b.closest('[data-testid="stColumn"], [data-testid="stMainBlockContainer"]')
                                   .getBoundingClientRect();
                   return b.scrollWidth > b.clientWidth + 1 || box.right > column.right + 1
                          || box.right > window.innerWidth; })
    .map(b => b.textContent)""".replace("BUTTONS", BUTTONS)


def test_every_option_is_whole_on_a_laptop_with_the_sidebar_open(app_page, tiny_llama_dir):
    """Issue 50, item 16a: at 1024 × 768 with the sidebar open "t-SNE" and the "token" colouring were cut off."""
    app_page.page.set_viewport_size({"width": 1024, "height": 768})
    page = app_page.open("qk-map", {"model": tiny_llama_dir, "corpus": "Your documents", "docs": DOCS})
    page.wait_for_selector(".js-plotly-plot .scatterlayer .point", timeout=120_000)
    app_page.wait_until_drawn()
    main = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').getBoundingClientRect().width")
    assert main < 780, main  # the sidebar is open: a narrow main column
    names = page.evaluate(f"() => {BUTTONS}.map(b => b.textContent)")
    assert {"t-SNE", "token"} <= set(names), names
    assert page.evaluate(CLIPPED_OPTIONS) == []
    app_page.assert_clean()
