"""The Attention page's head control (issue 51): where the head switch draws the head, its "Head n" buttons are the
one control for it (no "Head (counted from 0)" select box beside them); the link's ``head=`` still opens that head,
a choice reaches the link, and the views without the switch (one layer, BertViz, rollout) keep the select box, showing
the head chosen with the switch."""

from __future__ import annotations

import json

import pytest

from tests.test_app import choose_head, open_app, page_errors
from tests.test_deck_link import needs_chromium
from ui.page_state import view_query
from viz.head_cells import from_wire

pytestmark = pytest.mark.app

TEXT = "the cat sat on the mat"


def _head_boxes(at) -> list:
    return [box for box in at.selectbox if box.label == "Head (counted from 0)"]


def _head_title(at) -> str:
    """The head on screen: the head switch's layer and head where it draws it (its Plotly figure is then not drawn,
    only built for its downloads), else the Plotly head figure's title."""
    switches = [c.proto for c in at.get("bidi_component") if c.proto.component_name.endswith("attention_head_switch")]
    if switches:
        assert not [c for c in at.get("plotly_chart") if c.proto.id.endswith("-attention-head")]
        data = from_wire(switches[0].bytes)
        return f"layer {data['layer']}, head {data['head']}"
    (chart,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith("-attention-head")]
    return json.loads(chart.proto.spec)["layout"]["title"]["text"]


def test_the_switch_is_the_one_head_control_and_the_link_opens_its_head(tiny_bert_dir):
    at = open_app({"model": tiny_bert_dir, "text": TEXT, "layer": "1", "head": "3"}, page="app_pages/attention.py")
    assert not page_errors(at), page_errors(at)
    assert not _head_boxes(at)
    assert "layer 1, head 3" in _head_title(at)
    assert view_query(at.session_state)["head"] == "3"
    choose_head(at, 2)  # what the switch's callback does with a click on "Head 2"
    assert not page_errors(at), page_errors(at)
    assert "layer 1, head 2" in _head_title(at) and view_query(at.session_state)["head"] == "2"
    assert not _head_boxes(at)


@pytest.mark.parametrize("view", ["one layer", "BertViz"])
def test_views_without_the_switch_keep_the_select_box_with_the_chosen_head(tiny_bert_dir, view):
    at = open_app({"model": tiny_bert_dir, "text": TEXT, "head": "1"}, page="app_pages/attention.py")
    choose_head(at, 2)
    at.segmented_control(key="attention.view").set_value(view).run()
    assert not page_errors(at), page_errors(at)
    (box,) = _head_boxes(at)
    assert box.value == 2 and view_query(at.session_state)["head"] == "2"
    box.set_value(3).run()  # chosen in the box, then back to one head: the switch shows that head, the box is gone
    at.segmented_control(key="attention.view").set_value("one head").run()
    assert not page_errors(at), page_errors(at)
    assert not _head_boxes(at) and "head 3" in _head_title(at) and view_query(at.session_state)["head"] == "3"


def test_rollout_has_no_switch_and_a_disabled_head_box(tiny_bert_dir):
    at = open_app({"model": tiny_bert_dir, "text": TEXT, "source": "rollout"}, page="app_pages/attention.py")
    assert not page_errors(at), page_errors(at)
    (box,) = _head_boxes(at)
    assert box.disabled


def test_the_next_layers_heads_and_figure_are_ready_before_it_is_chosen(tiny_bert_dir):
    """While the reader looks at layer 0, its neighbour's packed heads and head figure are computed in the
    background (``ui.ahead``): choosing layer 1 then computes neither again, and shows layer 1."""
    from ui import results

    at = open_app({"model": tiny_bert_dir, "text": TEXT, "layer": "0", "head": "2"}, page="app_pages/attention.py")
    assert not page_errors(at), page_errors(at)
    assert at.session_state["attention-ahead"].idle(timeout=60)
    cells, figures = results.head_cells.computed(), results.figures.computed()
    at.selectbox(key="attention.layer").set_value(1).run()
    assert not page_errors(at), page_errors(at)
    assert "layer 1, head 2" in _head_title(at)
    assert results.head_cells.computed() == cells and results.figures.computed() == figures
    at.session_state["attention-ahead"].idle(timeout=60)
    # back to layer 0: its packed heads were kept, not packed again
    at.selectbox(key="attention.layer").set_value(0).run()
    assert "layer 0, head 2" in _head_title(at) and results.head_cells.computed() == cells


@needs_chromium
def test_the_shown_heads_image_downloads_as_svg_drawn_only_when_asked(tiny_bert_dir, monkeypatch):
    """The head's Plotly figure is not drawn where the switch shows the head; its download (the sidebar's format,
    here SVG) builds it and draws it on the server only when clicked: a vector file naming the layer and head."""
    import streamlit as st

    from viz import attention as va

    asked, built = {}, []
    real_button, real_figure = st.download_button, va.head_figure
    monkeypatch.setattr(st, "download_button", lambda label, data, *a, **k: asked.update({k.get("key"): data})
                        or real_button(label, data, *a, **k))
    monkeypatch.setattr(va, "head_figure", lambda *a, **k: built.append(k["title"]) or real_figure(*a, **k))
    at = open_app({"model": tiny_bert_dir, "text": TEXT, "layer": "1", "head": "3", "img": "SVG"},
                  page="app_pages/attention.py")
    assert not page_errors(at), page_errors(at)
    assert "Download image (SVG)" in [b.label for b in at.get("download_button")]
    assert built == []  # nothing built for the page
    svg = asked["attention-head-image"]().decode("utf-8")
    assert svg.lstrip().startswith("<svg") and "layer 1, head 3" in svg
    assert len(built) == 1 and "layer 1, head 3" in built[0]


def test_without_chromium_the_head_offers_its_data_and_says_why_there_is_no_image(tiny_bert_dir, monkeypatch):
    """A server without the Chromium the head's image is drawn with (``make run`` installs none) offers no image
    button whose click could only fail with Streamlit's "Failed to generate file for download": a sentence says why,
    and the data still downloads."""
    monkeypatch.setattr("viz.deck_render.CHROMIUM", "/nonexistent/chromium")
    at = open_app({"model": tiny_bert_dir, "text": TEXT, "layer": "1", "head": "3"}, page="app_pages/attention.py")
    assert not page_errors(at), page_errors(at)
    labels = [b.label for b in at.get("download_button")]
    assert not [label for label in labels if label.startswith("Download image")], labels
    assert "Download data (CSV)" in labels
    assert any("no Chromium" in c.value for c in at.caption)
