"""BertViz HTML made offline-safe (viz/bertviz_offline.py): no remote URL, no way out of the <script>."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest

from viz import bertviz_offline as bv

ATTACK = "</script><img src=x onerror=alert(1)>"
TOKENS = ["[CLS]", ATTACK, "<!--", "a\u2028b", "&amp;", "[SEP]"]


def _attention(layers=2, heads=3, n=len(TOKENS)) -> np.ndarray:  # noqa: B008 - TOKENS is a constant: its length, once
    m = np.random.default_rng(0).random((layers, heads, n, n))
    return m / m.sum(-1, keepdims=True)


def _params(html: str) -> dict:
    """The JSON handed to BertViz's script, decoded back."""
    match = re.search(r"const params = (\{.*?\}); // HACK", html, re.S) or re.search(r"window\.bertviz_params = (\{.*?\});</script>", html, re.S)
    return json.loads(match.group(1))


@pytest.fixture(params=["head", "model", "neuron"])
def html(request) -> str:
    a = _attention()
    if request.param == "head":
        return bv.head_view_html(a, TOKENS, layers=[0, 1], layer=1)
    if request.param == "model":
        return bv.model_view_html(a, TOKENS, layers=[0, 1])
    q = np.ones((2, 3, len(TOKENS), 4))
    return bv.neuron_view_html(a, q, q, TOKENS, bidirectional=True)


def test_no_request_leaves_the_page(html):
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "cdnjs" not in html and "require.min.js" not in html
    assert "sourceMappingURL" not in html


def test_libraries_are_inlined_from_installed_packages(html):
    assert "jQuery" in html and "d3js.org v5" in html  # jQuery (XStatic) and d3 v5 (mpld3)
    assert "window.require = window.requirejs" in html  # the shim, not require.js


class _Elements(HTMLParser):
    """The elements and comments an HTML parser (like the browser's) finds in the page."""

    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.comments = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_comment(self, data):
        self.comments += 1


def test_user_tokens_cannot_close_the_script_or_open_a_comment(html):
    parsed = _Elements()
    parsed.feed(html)
    scripts = 4 if "bertviz_params" not in html else 5  # jQuery, d3, shim, (params,) view
    assert parsed.tags.count("script") == scripts
    assert "img" not in parsed.tags and parsed.comments == 0
    assert "<!--" not in html and "\u2028" not in html
    decoded = _params(html)
    labels = decoded["attention"][0]["left_text"] if isinstance(decoded["attention"], list) else decoded["attention"]["all"]["left_text"]
    assert labels == TOKENS  # escaped on the way in, identical once parsed


def test_script_json_escapes_every_breakout_character():
    text = bv.script_json({"t": "</script><!--&\u2028\u2029"})
    assert not set("<>&\u2028\u2029") & set(text)
    assert json.loads(text) == {"t": "</script><!--&\u2028\u2029"}


def test_script_json_refuses_nan():
    with pytest.raises(ValueError):
        bv.script_json({"x": float("nan")})


def test_head_view_sends_only_the_chosen_layers():
    a = _attention(layers=4)
    params = _params(bv.head_view_html(a, TOKENS, layers=[1, 2], layer=2))
    assert params["include_layers"] == [1, 2] and params["layer"] == 2
    sent = np.array(params["attention"][0]["attn"])
    assert sent.shape == (2, 3, len(TOKENS), len(TOKENS))
    assert np.allclose(sent, a[[1, 2]], atol=10 ** -bv.DECIMALS)


def test_model_view_counts_its_heads():
    params = _params(bv.model_view_html(_attention(heads=5), TOKENS, layers=[0]))
    assert params["include_heads"] == [0, 1, 2, 3, 4] and params["total_heads"] == 5


def test_neuron_view_carries_queries_and_keys():
    a = _attention()
    q = np.arange(2 * 3 * len(TOKENS) * 4, dtype=float).reshape(2, 3, len(TOKENS), 4)
    params = _params(bv.neuron_view_html(a, q, -q, TOKENS, bidirectional=False, layer=1, head=2))
    sent = params["attention"]["all"]
    assert np.array(sent["queries"]).shape == q.shape and np.allclose(sent["keys"], -q)
    assert params["bidirectional"] is False and (params["layer"], params["head"]) == (1, 2)


def test_wrong_shapes_are_refused():
    with pytest.raises(ValueError):
        bv.head_view_html(_attention(), TOKENS[:-1], layers=[0])
    with pytest.raises(ValueError):
        bv.model_view_html(_attention(), TOKENS, layers=[5])


def test_layer_budget_and_window():
    assert bv.layer_budget(12, 20, max_weights=12 * 400 * 3) == 3
    assert bv.layer_budget(12, 512) == 0  # one layer of 512 tokens is 3.1 M lines
    assert bv.layers_near(5, 12, 3) == [4, 5, 6]
    assert bv.layers_near(0, 12, 3) == [0, 1, 2]
    assert bv.layers_near(11, 12, 4) == [8, 9, 10, 11]
    assert bv.layers_near(3, 6, 10) == [0, 1, 2, 3, 4, 5]


def test_layers_to_send_says_why_it_restricts():
    assert bv.layers_to_send(6, 12, 20, 2) == (list(range(6)), None)  # 6 × 12 × 400 weights fit
    sent, why = bv.layers_to_send(12, 12, 128, 7)
    assert sent == [7] and "only layers 7–7" in why  # one layer is 196,608 lines
    sent, why = bv.layers_to_send(12, 12, 512, 0)
    assert sent == [] and "3,145,728 lines" in why
