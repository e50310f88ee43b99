"""The Information flow page in a real browser: the route graph draws, picking an edge opens its detail, and hostile
text stays text."""

from __future__ import annotations

import re

import pytest

from tests.browser.test_hostile import _injected
from tests.lm_factory import build_tiny_llama_lm

pytestmark = pytest.mark.browser

HOSTILE = "<img src=x onerror=alert(1)>"


def test_the_route_draws_and_an_edge_opens_its_detail_with_hostile_text(app_page, tmp_path):
    folder = build_tiny_llama_lm(tmp_path / "tiny-llama-lm")
    page = app_page.open("flow", {"model": str(folder), "text": f"the cat {HOSTILE}", "threshold": "0.01"})
    page.wait_for_selector(".js-plotly-plot .scatterlayer .trace", timeout=60_000)
    assert page.locator(".js-plotly-plot .scatterlayer .js-line").count() >= 3  # residual, MLP and head edges
    ticks = page.locator(".js-plotly-plot .xtick text").all_text_contents()
    assert any(">" in t for t in ticks)  # the hostile token shown as text on the axis
    box = page.locator('[data-testid="stMain"]').get_by_role("combobox", name=re.compile("^Details of an edge"))
    box.click()
    page.keyboard.type("attention (top head")  # the list is long and filtered by typing, as a keyboard user does
    page.get_by_role("option").filter(has_text=re.compile(r"^attention \(top head")).first.click()
    page.wait_for_selector("text=What head", timeout=60_000)
    app_page.wait_until_idle()
    assert page.locator(".js-plotly-plot").count() == 2  # the route and the head's attention row
    assert not _injected(page), _injected(page)
    app_page.assert_clean()
