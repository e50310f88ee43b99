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
