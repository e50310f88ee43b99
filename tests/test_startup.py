"""The first visit to a server that has just started: a message, and the browser loads the charting code meanwhile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import ui.startup

APP = str(Path(__file__).resolve().parents[1] / "app.py")
pytestmark = pytest.mark.app


def _preload_block(at: AppTest):
    return [b for b in at.main.children.values() if getattr(b, "proto", None) is not None
            and str(getattr(b.proto, "id", "")).endswith("-plotly-preload")]


def test_after_a_real_wait_for_the_libraries_an_empty_hidden_chart_preloads_plotly(monkeypatch):
    waits = []
    really_wait = ui.startup.wait_for_imports

    def wait_for_imports(timeout=None):  # not imported within the first short wait; then waited for
        waits.append(timeout)
        return False if timeout is not None else really_wait()

    monkeypatch.setattr(ui.startup, "wait_for_imports", wait_for_imports)
    at = AppTest.from_file(APP, default_timeout=180).run()
    assert not at.exception
    [block] = _preload_block(at)
    [chart] = [c for c in at.get("plotly_chart") if json.loads(c.proto.spec)["data"][0].get("x") == []]
    assert len(chart.proto.spec) < 500, "the preloading chart carries Plotly's default template (~10 kB) for nothing"
    styles = [h.proto.body for h in at.get("html")]
    assert any(".st-key-plotly-preload" in body and "display: none" in body for body in styles), \
        "the preloading chart is not hidden"
    assert len(at.get("plotly_chart")) >= 2, "the page's own figure is missing after the start-up wait"
    assert waits == [0.2, None], "the page went on before the libraries were imported"


def test_once_the_libraries_are_imported_nothing_is_preloaded(monkeypatch):
    monkeypatch.setattr(ui.startup, "wait_for_imports", lambda timeout=None: True)
    at = AppTest.from_file(APP, default_timeout=180).run()
    assert not at.exception
    assert not _preload_block(at)
    assert not any(".st-key-plotly-preload" in h.proto.body for h in at.get("html"))
