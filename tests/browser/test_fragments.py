"""A control inside a fragment reruns only its fragment: nothing above it is rebuilt or sent again."""

from __future__ import annotations

import numpy as np
import pytest

from tests.browser.fragments import Recorder
from tests.browser.test_head_switch import assert_drawn
from tests.browser.test_navigation import choose

pytestmark = pytest.mark.browser

TEXT = "The cat sat on the mat near the river bank."
# the head switch's title (ui/head_switch.js) is the text given: the one-head view's heatmap, drawn by the switch
SWITCH_SHOWN = """(title) => [...document.querySelectorAll('[data-testid="stMain"] *')].map(e => e.shadowRoot)
    .filter(Boolean).map(r => r.querySelector('.head-switch .title')).some(t => t && t.textContent === title)"""


def _open(app_page, path: str, query: dict[str, str]) -> Recorder:
    recorder = Recorder(app_page.page)  # listens before the page opens its websocket
    app_page.open(path, query)
    return recorder


def test_attention_head_and_layer_rerun_only_the_head_figure(app_page):
    recorder = _open(app_page, "attention", {"text": TEXT, "layer": "0", "head": "0"})
    page = app_page.page
    page.wait_for_function(SWITCH_SHOWN, arg="Layer 0, head 0", timeout=60_000)
    for click, (label, option, title) in enumerate((("Head", "3", "Layer 0, head 3"),
                                                     ("Layer (counted from 0)", "2", "Layer 2, head 3"))):
        recorder.start()
        if click:
            choose(app_page, label, option, in_fragment=True)
        else:  # the head switch's button (the page's only head control in this view)
            page.get_by_role("radio", name=f"{label} {option}", exact=True).click()
        page.wait_for_function(SWITCH_SHOWN, arg=title, timeout=60_000)
        app_page.wait_until_idle()
        reply = recorder.reply()
        assert reply.fragment_run and not reply.full_run, reply
        # no figure sent (only references to unchanged elements): the overview stays, and the head is the switch's
        # (its Plotly figure built only for its downloads)
        assert all(t.startswith("<cached message") for t in reply.figure_titles), reply.figure_titles
        if click:  # the pickers not clicked did not change: cached by the browser at the click before, they come as
            # references; the one clicked is sent again, drawn with its new value as its default (ui.page_state.option)
            assert reply.elements.count("selectbox") == 1 and "button_group" not in reply.elements, reply
            assert reply.references >= 2, reply
    assert "head=3" in page.url and "layer=2" in page.url  # the choice still reaches the link
    app_page.assert_clean()


def test_attention_page_option_still_redraws_the_overview(app_page):
    """The control: an option above the overview is a full run that sends the overview again."""
    recorder = _open(app_page, "attention", {"text": TEXT})
    recorder.start()
    choose(app_page, "Palette", "viridis")
    app_page.wait_until_idle()
    reply = recorder.reply()
    assert reply.full_run and not reply.fragment_run, reply
    assert any("every layer" in t for t in reply.figure_titles), reply.figure_titles


def test_a_click_fetches_no_favicon_and_the_csv_is_the_head_on_screen(app_page):
    """The favicon is inline, so a click that changes the URL fetches nothing over HTTP; the file the CSV button
    gives after two clicks is the CSV of the head drawn now, never an earlier one."""
    import csv
    import io

    recorder = _open(app_page, "attention", {"text": TEXT, "layer": "0", "head": "0"})
    page = app_page.page
    page.wait_for_function(SWITCH_SHOWN, arg="Layer 0, head 0", timeout=60_000)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    for label, option, title in (("Head", "3", "Layer 0, head 3"), ("Layer (counted from 0)", "2", "Layer 2, head 3")):
        recorder.start()
        if label == "Head":  # the head switch's button
            page.get_by_role("radio", name=f"{label} {option}", exact=True).click()
        else:
            choose(app_page, label, option, in_fragment=True)
        page.wait_for_function(SWITCH_SHOWN, arg=title, timeout=60_000)
        app_page.wait_until_idle()
        reply = recorder.reply()
        assert reply.fragment_run, reply
    assert "head=3" in page.url and "layer=2" in page.url
    assert requests == [], requests  # no favicon (or anything else) fetched again on a URL change
    with page.expect_download(timeout=60_000) as download:
        page.locator('[data-testid="stMain"]').get_by_role("button", name="Download data (CSV)").last.click()
    saved = download.value
    assert saved.suggested_filename.endswith("layer-2-head-3.csv"), saved.suggested_filename
    rows = list(csv.DictReader(io.StringIO(saved.path().read_text(encoding="utf-8"))))
    keys = list(rows[0])[1:]
    weights = np.array([[float(row[k]) for k in keys] for row in rows])
    assert weights.shape == (len(rows), len(rows))
    assert_drawn(page, 3, {3: weights})  # every cell the switch draws now is the CSV's weight's colour
    app_page.assert_clean()
