"""The Information flow page in a real browser: the route graph draws, a click on an edge of the figure opens its
detail and goes into the link, picking a node from the list (as a keyboard does) opens its detail, and hostile text
stays text."""

from __future__ import annotations

import re

import pytest

from tests.browser.test_hostile import injected_texts
from tests.lm_factory import build_tiny_llama_lm
from tests.model_factory import build_tiny_t5

pytestmark = pytest.mark.browser

HOSTILE = "<img src=x onerror=alert(1)>"
# The centre, in page pixels, of the clickable point of the heaviest cross-position attention edge (the invisible
# marker the figure puts on each edge, named by its edge id), the figure scrolled into the window first; and its id.
EDGE_POINT = r"""() => {
    const plot = document.querySelector('.js-plotly-plot');
    plot.scrollIntoView({block: 'center'});
    const index = plot.data.findIndex(t => t.name === 'edges');
    const ids = plot.data[index].customdata;
    const weight = id => parseFloat(plot.data[index].hovertext[ids.indexOf(id)].match(/inputs: ([0-9.]+)%/)[1]);
    const cross = ids.filter(id => { const [, a, , b] = id.match(/^attention\|\w+:-?\d+:(\d+)>\w+:\d+:(\d+)$/) || [];
                                     return a !== undefined && a !== b; });
    const id = cross.sort((a, b) => weight(b) - weight(a))[0];
    const point = plot.querySelectorAll('.scatterlayer .trace')[index].querySelectorAll('.point')[ids.indexOf(id)];
    const box = point.getBoundingClientRect();
    return [box.x + box.width / 2, box.y + box.height / 2, id];
}"""


def test_the_route_draws_and_an_edge_opens_its_detail_with_hostile_text(app_page, tmp_path):
    folder = build_tiny_llama_lm(tmp_path / "tiny-llama-lm")
    page = app_page.open("flow", {"model": str(folder), "text": f"the cat {HOSTILE}", "threshold": "0.01"})
    page.wait_for_selector(".js-plotly-plot .scatterlayer .trace", timeout=60_000)
    assert page.locator(".js-plotly-plot .scatterlayer .js-line").count() >= 3  # residual, MLP and head edges
    ticks = page.locator(".js-plotly-plot .xtick text").all_text_contents()
    assert any(">" in t for t in ticks)  # the hostile token shown as text on the axis
    # a click on an edge of the figure opens its detail and puts it in the link
    x, y, clicked = page.evaluate(EDGE_POINT)
    page.mouse.click(x, y)
    page.wait_for_function(f"() => new URLSearchParams(location.search).get('item') === {clicked!r}", timeout=60_000)
    page.wait_for_selector("text=What head", timeout=60_000)
    app_page.wait_until_idle()
    assert page.locator(".js-plotly-plot").count() == 2  # the route and the head's attention row
    page.wait_for_function("() => document.querySelector('.js-plotly-plot').data.some(t => t.name === 'picked')",
                           timeout=60_000)  # the clicked edge is ringed on the figure
    # a keyboard picks a node from the list: the list is long and filtered by typing
    box = page.locator('[data-testid="stMain"]').get_by_role("combobox", name=re.compile("^Details of an edge"))
    box.click()
    page.keyboard.type("hidden state 2")
    page.get_by_role("option").filter(has_text=re.compile(r"^“.*hidden state 2")).first.click()
    page.wait_for_selector("text=Logit lens", timeout=60_000)
    app_page.wait_until_idle()
    assert not injected_texts(page), injected_texts(page)
    app_page.assert_clean()


# The route's figure (the plot with an "edges" trace: the start-up's hidden chart may come first) and the centre, in
# page pixels, of the clickable point of its heaviest cross-attention edge, with the edge's id.
ROUTE_PLOT = "[...document.querySelectorAll('.js-plotly-plot')].find(p => p.data && p.data.some(t => t.name === 'edges'))"
CROSS_POINT = r"""() => {
    const plot = ROUTE_PLOT;
    plot.scrollIntoView({block: 'center'});
    const index = plot.data.findIndex(t => t.name === 'edges');
    const ids = plot.data[index].customdata;
    const weight = id => parseFloat(plot.data[index].hovertext[ids.indexOf(id)].match(/inputs: ([0-9.]+)%/)[1]);
    const id = ids.filter(id => id.startsWith('cross|')).sort((a, b) => weight(b) - weight(a))[0];
    const point = plot.querySelectorAll('.scatterlayer .trace')[index].querySelectorAll('.point')[ids.indexOf(id)];
    const box = point.getBoundingClientRect();
    return [box.x + box.width / 2, box.y + box.height / 2, id];
}""".replace("ROUTE_PLOT", ROUTE_PLOT)


def test_an_encoder_decoder_route_draws_and_a_cross_edge_opens_its_detail(app_page, tmp_path):
    folder = build_tiny_t5(tmp_path / "tiny-t5")
    page = app_page.open("flow", {"model": str(folder), "text": f"the cat {HOSTILE}", "target": "the dog sat",
                                  "threshold": "0.01"})
    page.wait_for_function(f"() => {ROUTE_PLOT} !== undefined", timeout=90_000)
    app_page.wait_until_idle()
    assert page.evaluate(f"() => {ROUTE_PLOT}.data.some(t => t.line && t.line.dash === 'dot')")  # cross edges, dotted
    ticks = page.evaluate(f"() => [...{ROUTE_PLOT}.querySelectorAll('.xtick text')].map(t => t.textContent)")
    assert any(">" in t for t in ticks)  # the hostile token shown as text on the axis
    x, y, clicked = page.evaluate(CROSS_POINT)
    assert clicked.startswith("cross|")
    page.mouse.click(x, y)
    page.wait_for_function(f"() => new URLSearchParams(location.search).get('item') === {clicked!r}", timeout=60_000)
    page.wait_for_selector("text=from source token", timeout=60_000)
    app_page.wait_until_idle()
    assert page.locator(".js-plotly-plot").filter(visible=True).count() == 2  # the route and the head's row
    assert not injected_texts(page), injected_texts(page)
    app_page.assert_clean()


# The route figure's layout in page pixels: its plot area (Plotly's drag layer), every node marker's box, the legend's
# height, and which tokens label the x axis.
ROUTE_LAYOUT = """() => {
    const plot = ROUTE_PLOT;
    const x = plot._fullLayout.xaxis, frame = plot.getBoundingClientRect();
    const area = {left: frame.left + x._offset, right: frame.left + x._offset + x._length};
    const boxes = [...plot.querySelectorAll('.scatterlayer .trace')]
        .filter((_, i) => ['representation', 'MLP'].includes(plot.data[i].name))
        .flatMap(t => [...t.querySelectorAll('.point')].map(p => p.getBoundingClientRect()));
    const legend = plot.querySelector('.legend');
    return {left: area.left, right: area.right, window: window.innerWidth,
            points: boxes.map(b => [b.left, b.right]),
            legend: legend ? legend.getBoundingClientRect().height : 0,
            ticks: [...plot.querySelectorAll('.xtick text')].map(t => t.textContent)};
}""".replace("ROUTE_PLOT", ROUTE_PLOT)
PHONE_TEXT = "the cat sat on the mat and the dog lay"  # 12 tokens on the MiniLM, [CLS] and [SEP] included
PHONE = {"width": 390, "height": 844}
# 15 and 20 tokens on the MiniLM (one word piece a word): 15 showed 8 labels (issue 50, item 16b)
LONGER_PHONE_TEXTS = (PHONE_TEXT + " by the door", PHONE_TEXT + " by the door while the old man read")
# The drawn token labels: text and box (turned upright, their boxes are as wide as a line is high), the figure's box.
TICK_BOXES = """() => {
    const plot = ROUTE_PLOT;
    const frame = plot.getBoundingClientRect();
    return {frame: [frame.left, frame.top, frame.right, frame.bottom], window: window.innerWidth,
            ticks: [...plot.querySelectorAll('.xtick text')].map(t => {
                const b = t.getBoundingClientRect();
                return [t.textContent, b.left, b.top, b.right, b.bottom, parseFloat(getComputedStyle(t).fontSize)];
            })};
}""".replace("ROUTE_PLOT", ROUTE_PLOT)


@pytest.mark.integration
def test_on_a_phone_the_route_fits_labels_every_token_and_a_node_opens_its_details(app_page):
    """Issue 50, items 16b and 12: at 390 × 844 the MiniLM's route ran its last column and MLP squares past the right
    edge, labelled every other token (the y title, "embedding" and Plotly's 80-px right margin left too little room;
    15 tokens still showed 8 labels) and its legend took a whole screen (its title kept the left half of every row); a
    node opened only its title. Texts of 15 and 20 tokens draw every label, at 9 px or more, none over another."""
    app_page.page.set_viewport_size(PHONE)
    page = app_page.open("flow", {"model": "all-MiniLM-L6-v2", "text": PHONE_TEXT})
    page.wait_for_function(f"() => {ROUTE_PLOT} !== undefined", timeout=180_000)
    app_page.wait_until_idle()
    layout = page.evaluate(ROUTE_LAYOUT)
    assert layout["points"]
    assert max(right for _, right in layout["points"]) <= min(layout["right"] + 1, layout["window"]), layout["right"]
    assert min(left for left, _ in layout["points"]) >= layout["left"] - 1
    assert layout["legend"] <= 0.2 * PHONE["height"], layout["legend"]
    expected = ["[CLS]", *PHONE_TEXT.split(), "[SEP]"]  # every token's label, in order
    assert layout["ticks"] == expected, layout["ticks"]
    # a click on a node of the figure (the rightmost representation node at the top): its shares in a sentence
    x, y, clicked = page.evaluate(NODE_POINT)
    assert x <= PHONE["width"]
    page.mouse.click(x, y)
    page.wait_for_function(f"() => new URLSearchParams(location.search).get('item') === {clicked!r}", timeout=60_000)
    app_page.wait_until_idle()
    layer = int(clicked.split(":")[1])
    page.wait_for_selector(f"text=/Layer {layer}'s MLP brings .* the residual stream passed on carries/",
                           timeout=60_000)
    # an attention node picked from the list: its sentence and the keys it reads with their attention weights
    box = page.locator('[data-testid="stMain"]').get_by_role("combobox", name=re.compile("^Details of an edge"))
    box.click()
    page.keyboard.type("after attention")
    page.get_by_role("option").filter(has_text=re.compile("after attention")).first.click()
    app_page.wait_until_idle()
    page.wait_for_selector("text=/the heads bring/", timeout=60_000)
    # the keys' table: its header in the grid's accessible table (the grid draws on a canvas), once it has filled it
    page.wait_for_function("""() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stDataFrame"]')]
        .some(grid => grid.textContent.includes('its attention weight'))""", timeout=60_000)
    app_page.assert_clean()
    for text in LONGER_PHONE_TEXTS:  # every token's label drawn, readable, inside the figure, none over another
        page = app_page.open("flow", {"model": "all-MiniLM-L6-v2", "text": text})
        page.wait_for_function(f"() => {ROUTE_PLOT} !== undefined", timeout=180_000)
        app_page.wait_until_idle()
        drawn = page.evaluate(TICK_BOXES)
        expected = ["[CLS]", *text.split(), "[SEP]"]
        assert [t[0] for t in drawn["ticks"]] == expected, (len(expected), [t[0] for t in drawn["ticks"]])
        left, top, right, bottom = drawn["frame"]
        for label, x0, y0, x1, y1, size in drawn["ticks"]:
            assert size >= 9, (label, size)
            assert left - 0.5 <= x0 and x1 <= min(right, drawn["window"]) + 0.5 and top <= y0 and y1 <= bottom, label
        boxes = sorted(drawn["ticks"], key=lambda t: t[1])
        for a, b in zip(boxes, boxes[1:]):
            assert a[3] <= b[1] + 0.5, f"{len(expected)} tokens: “{a[0]}” ({a[1]:.1f}–{a[3]:.1f}) over “{b[0]}”"
        app_page.assert_clean()


# The centre, in page pixels, of the highest node of the route (its chosen token's last representation) and its id.
NODE_POINT = r"""() => {
    const plot = ROUTE_PLOT;
    plot.scrollIntoView({block: 'center'});
    const index = plot.data.findIndex(t => t.name === 'representation');
    const ys = plot.data[index].y;
    const top = ys.indexOf(Math.max(...ys));
    const box = plot.querySelectorAll('.scatterlayer .trace')[index].querySelectorAll('.point')[top]
        .getBoundingClientRect();
    return [box.x + box.width / 2, box.y + box.height / 2, plot.data[index].customdata[top]];
}""".replace("ROUTE_PLOT", ROUTE_PLOT)


@pytest.mark.integration
def test_smollm2s_route_has_rows_apart_and_its_named_edge_opens(app_page):
    """Issue 50, item 11: SmolLM2's 30 layers × 2 node rows in about 450 px put the edges the sentence named in a
    20-px band over the embedding row. Every node row is now at least 16 px from the next, and the heaviest edge
    between positions opens on a click."""
    page = app_page.open("flow", {"model": "SmolLM2-135M-Instruct", "text": "The capital of France is"})
    page.wait_for_function(f"() => {ROUTE_PLOT} !== undefined", timeout=180_000)
    app_page.wait_until_idle()
    rows = page.evaluate(f"""() => {{
        const plot = {ROUTE_PLOT};
        const axis = plot._fullLayout.yaxis;
        return [axis.l2p(0), axis.l2p(1), axis.l2p(2)];
    }}""")
    assert abs(rows[0] - rows[1]) >= 16 and abs(rows[1] - rows[2]) >= 16, rows
    # the point itself scrolled to the middle of the window: the figure is taller than the window now
    x, y, clicked = page.evaluate(EDGE_POINT.replace("document.querySelector('.js-plotly-plot')", ROUTE_PLOT).replace(
        "const box = point", "point.scrollIntoView({block: 'center'});\n    const box = point"))
    page.mouse.click(x, y)
    page.wait_for_function(f"() => new URLSearchParams(location.search).get('item') === {clicked!r}", timeout=60_000)
    page.wait_for_selector("text=What head", timeout=60_000)
    app_page.assert_clean()
