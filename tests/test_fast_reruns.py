"""A click rebuilds only what it changed: figures are cached by small keys, downloads are built when clicked.

AppTest reruns the whole script on every interaction (it has no fragment-only reruns; the real
browser's fragment runs are tested in tests/browser/test_fragments.py), so these tests count how
often the builders run across such reruns.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.test_app import choose_head

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")

pytestmark = pytest.mark.app


def _count_calls(monkeypatch, module, names: list[str]) -> Counter:
    calls: Counter = Counter()
    for name in names:
        original = getattr(module, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    return calls


def _attention_page(model_dir: str, text: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update({"model": model_dir, "text": text})
    at.run()
    at.switch_page("app_pages/attention.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_head_change_does_not_rebuild_the_overview(tiny_bert_dir, monkeypatch):
    from viz import attention as va
    from viz import attention_tables as vt

    calls = _count_calls(monkeypatch, va, ["overview_figure"])
    tables = _count_calls(monkeypatch, vt, ["cells_table", "matrix_table"])
    titles, head_figure = [], va.head_figure

    def counted(*args, **kwargs):
        titles.append(kwargs["title"])
        return head_figure(*args, **kwargs)

    monkeypatch.setattr(va, "head_figure", counted)

    def shown_layer() -> list[str]:  # the head figures of layer 0, the one on screen
        return [t for t in titles if "layer 0," in t]

    at = _attention_page(tiny_bert_dir, "a head change rebuilds one figure only")
    assert calls["overview_figure"] == 1
    choose_head(at, 1)
    assert not at.exception, [e.value for e in at.exception]
    assert calls["overview_figure"] == 1, "the overview was rebuilt for a head change"
    choose_head(at, 0)
    # the head switch draws the head: its Plotly figure is built only for a download or a pin, never on a run, nor
    # ahead (ui.ahead packs the neighbouring layers' cells only)
    assert titles == [] and not [c for c in at.get("plotly_chart") if c.proto.id.endswith("-attention-head")]
    assert shown_layer() == []
    # no CSV table was built on any of these runs: downloads are built when clicked
    assert tables["cells_table"] == 0 and tables["matrix_table"] == 0


def test_palette_change_rebuilds_the_overview(tiny_bert_dir, monkeypatch):
    """The control: an option the overview depends on does rebuild it."""
    from viz import attention as va

    calls = _count_calls(monkeypatch, va, ["overview_figure"])
    at = _attention_page(tiny_bert_dir, "a palette change rebuilds the overview")
    at.selectbox(key="attention.palette").select("viridis").run()
    assert not at.exception, [e.value for e in at.exception]
    assert calls["overview_figure"] == 2


def test_csv_download_is_built_only_when_called(monkeypatch):
    import pandas as pd

    from ui import figures

    built = []
    seen = {}

    def fake_download_button(label, data, **kwargs):
        seen["data"] = data

    monkeypatch.setattr(figures.st, "download_button", fake_download_button)
    figures.csv_download("CSV", lambda: built.append(1) or pd.DataFrame({"a": [1, 2]}), file_name="x.csv", key=None)
    assert built == [] and callable(seen["data"])
    assert seen["data"]() == b"a\n1\n2\n" and built == [1]


def test_a_cached_figure_is_fitted_once_per_width_and_mode():
    """``show_figure`` fits each figure to its column on every rerun; a figure from a cache is fitted once per
    (width, mode), the fitted copy equals a fresh fit, and the caller's figure is left as it was."""
    import numpy as np

    from ui.figures import fitted
    from viz.attention import head_figure
    from viz.fit.page import fit_for_page

    weights = np.random.default_rng(0).dirichlet(np.ones(12), size=12).astype(np.float32)
    fig = head_figure(weights, [f"t{i}" for i in range(12)], title="a head", causal=False, colorscale="Blues")
    before = fig.to_json()
    page = fitted(fig, 736, slide=False)
    assert fitted(fig, 736, slide=False) is page
    assert page.to_json() == fit_for_page(fig, 736).to_json() != before
    assert fitted(fig, 500, slide=False) is not page and fitted(fig, 736, slide=True) is not page
    assert fig.to_json() == before
