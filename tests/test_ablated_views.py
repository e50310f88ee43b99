"""The attention and maxima pages show the ablated run chosen on the "Does it matter?" page, every panel alike."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pandas as pd
import pytest
import streamlit as st

from core.attention_heads.attention import attention_maxima
from core.causal.effects import ablate_heads
from core.model.inference import analyze
from core.model.models import load_model
from tests.test_app import choose_head, head_switch_weights, open_app, page_errors
from ui.ablation import STATE_KEY

pytestmark = pytest.mark.app

TEXT = "The cat sat on the mat because it was tired."
KNOCKED_OUT = ((0, 1), (0, 3))
LAYER = 1  # after the knocked-out heads of layer 0, so its attention changes


def _open(page: str, model_dir: str, knockout: bool = True):
    at = open_app({"model": model_dir, "text": TEXT}, page=page)
    if knockout:  # what ui.ablation.remember_knockout stores when the effects page picks the heads
        at.session_state[STATE_KEY] = {"model": model_dir, "heads": KNOCKED_OUT, "method": "zero"}
        at.run()
    assert not page_errors(at)
    return at


def _figures(at) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def trace_array(values) -> np.ndarray:
    """A trace's array as Plotly wrote it: a (nested) list, or a typed array ``{"dtype", "bdata", "shape"}``."""
    if isinstance(values, dict) and "bdata" in values:
        flat = np.frombuffer(base64.b64decode(values["bdata"]), dtype=np.dtype(values["dtype"]))
        shape = values.get("shape")
        return flat.reshape([int(n) for n in str(shape).split(",")] if shape else -1).astype(float)
    return np.array(values, dtype=float)


def _differ(a, b) -> bool:
    """The tiny random model's attention is nearly uniform, so a knock-out moves it by about 1e-6."""
    return float(np.abs(np.asarray(a, float) - np.asarray(b, float)).max()) > 5e-7


@pytest.fixture(scope="module")
def runs(tiny_bert_dir):
    model = load_model(tiny_bert_dir)
    return analyze(model, TEXT), ablate_heads(model, TEXT, KNOCKED_OUT, method="zero")


def test_the_attention_page_draws_the_ablated_run_when_toggled(tiny_bert_dir, runs, monkeypatch):
    plain, ablated = runs
    assert _differ(plain.attentions[LAYER, 2], ablated.attentions[LAYER, 2])
    tables = {}  # the CSV downloads' tables, by button key (built here as a click would)
    real = st.download_button

    def recording(label, data, *args, **kwargs):
        tables[kwargs.get("key")] = data
        return real(label, data, *args, **kwargs)

    monkeypatch.setattr(st, "download_button", recording)
    at = _open("app_pages/attention.py", tiny_bert_dir)
    at.selectbox(key="attention.layer").set_value(LAYER).run()
    choose_head(at, 2)

    def head_z():
        """The head switch's weights: codes of 4 decimals, rounded half up."""
        return head_switch_weights(at)

    def at_codes(weights):
        return np.floor(np.asarray(weights, np.float64) * 10**4 + 0.5) / 10**4

    def head_csv():
        """The head's CSV as a click would download it: a row per query, a column per key, at full precision."""
        return pd.read_csv(io.BytesIO(tables["attention-head-csv"]())).drop(columns="query").to_numpy()

    np.testing.assert_allclose(head_z(), at_codes(plain.attentions[LAYER, 2]), atol=1e-12)
    np.testing.assert_allclose(head_csv(), plain.attentions[LAYER, 2], atol=1e-7)
    at.toggle(key="show_ablated").set_value(True).run()
    assert not page_errors(at)
    assert any("knocked out" in c.value and "layer 0, head 1" in c.value for c in at.caption)
    # the tiny random model's knock-out moves these weights by about 1e-6, below the 4 decimals the switch draws
    # and sends, so the head is known to be the ablated run's by its CSV; its codes are that run's
    np.testing.assert_allclose(head_csv(), ablated.attentions[LAYER, 2], atol=1e-7)
    assert not np.allclose(head_csv(), plain.attentions[LAYER, 2], atol=1e-7, rtol=0)
    np.testing.assert_allclose(head_z(), at_codes(ablated.attentions[LAYER, 2]), atol=1e-12)
    overview = _figures(at)[0]
    assert "ablated run" in overview["layout"]["title"]["text"]
    # the one-layer grid and turning the toggle off again (the plain figures come back, not a cached ablated one)
    at.segmented_control(key="attention.view").set_value("one layer").run()
    assert not page_errors(at) and "ablated run" in _figures(at)[-1]["layout"]["title"]["text"]
    at.segmented_control(key="attention.view").set_value("one head").run()
    at.toggle(key="show_ablated").set_value(False).run()
    np.testing.assert_allclose(head_csv(), plain.attentions[LAYER, 2], atol=1e-7)
    np.testing.assert_allclose(head_z(), at_codes(plain.attentions[LAYER, 2]), atol=1e-12)
    assert "ablated run" not in _figures(at)[0]["layout"]["title"]["text"]


def test_the_maxima_page_draws_the_ablated_run_when_toggled(tiny_bert_dir, runs):
    plain, ablated = runs
    at = _open("app_pages/maxima.py", tiny_bert_dir)

    def grid_weights():
        grid = _figures(at)[0]["data"][0]
        return np.array([[cell[2] for cell in row] for row in grid["customdata"]], dtype=float)

    expected = {name: attention_maxima(run, heads="max", skip_special=True).weights for name, run in
                (("plain", plain), ("ablated", ablated))}
    assert _differ(expected["plain"], expected["ablated"])
    np.testing.assert_allclose(grid_weights(), expected["plain"], atol=1e-8)
    at.toggle(key="show_ablated").set_value(True).run()
    assert not page_errors(at)
    assert any("knocked out" in c.value for c in at.caption)
    np.testing.assert_allclose(grid_weights(), expected["ablated"], atol=1e-8)
    assert "ablated run" in _figures(at)[0]["layout"]["title"]["text"]
    # the raw / norm-weighted / rollout panels of the chosen layer show the ablated raw attention too
    at.selectbox(key="maxima.layer").set_value(LAYER).run()
    panels = [f for f in _figures(at) if len(f["data"]) >= 2 and "z" in f["data"][0]][-1]
    np.testing.assert_allclose(trace_array(panels["data"][0]["z"]), ablated.attentions[LAYER].mean(axis=0),
                               atol=1e-8)
    at.toggle(key="show_ablated").set_value(False).run()
    np.testing.assert_allclose(grid_weights(), expected["plain"], atol=1e-8)


@pytest.mark.parametrize("page", ["app_pages/attention.py", "app_pages/maxima.py"])
def test_no_toggle_without_knocked_out_heads(tiny_bert_dir, page):
    at = _open(page, tiny_bert_dir, knockout=False)
    assert not [t for t in at.toggle if t.key == "show_ablated"]
    at.session_state[STATE_KEY] = {"model": tiny_bert_dir, "heads": (), "method": "zero"}
    at.run()
    assert not [t for t in at.toggle if t.key == "show_ablated"]
