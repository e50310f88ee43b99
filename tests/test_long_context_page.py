"""The long-context page in AppTest: a tiny random Gemma 3 (a 4-token sliding window in its first layer) on the bundled
long text, and a tiny BERT on the sidebar's text; the drawn numbers are core.attention_heads.long_context's, run directly."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest

from tests.model_factory import build_tiny_decoder
from tests.test_app import open_app, page_errors

pytestmark = pytest.mark.app
PAGE = "app_pages/long-context.py"
HOSTILE = "<script>alert(1)</script> \"><img src=x onerror=alert(1)> " * 3


@pytest.fixture(scope="module")
def gemma_dir(tmp_path_factory):
    return str(build_tiny_decoder(tmp_path_factory.mktemp("long") / "gemma3", "gemma3_text"))


def _text(at) -> str:
    shown = "\n".join(m.value for m in at.markdown) + "\n" + "\n".join(c.value for c in at.caption)
    return shown.replace("\\", "")


def _z(at, key: str) -> np.ndarray:
    z = json.loads(next(c for c in at.get("plotly_chart") if c.key == key).proto.spec)["data"][0]["z"]
    if isinstance(z, dict):
        shape = [int(n) for n in str(z["shape"]).split(",")]
        return np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).reshape(shape)
    return np.array(z, dtype=float)


def _direct(model_dir: str, length: int):
    """The profile core.attention_heads.long_context gives for the bundled text cut to ``length`` tokens, with no page or cache."""
    from core.attention_heads.long_context import long_context_profile
    from core.attention_heads.retrieval import bundled_haystack, haystack_of_length
    from core.model.models import load_model
    from core.model.trace import record

    model = load_model(model_dir)
    added = len(model.tokenizer("", add_special_tokens=True)["input_ids"])
    text = haystack_of_length(model.tokenizer, bundled_haystack(), length - added)
    trace = record(model, text, max_tokens=length)
    assert list(trace.tokens("self").ids) == model.tokenizer(text)["input_ids"] and len(trace.tokens("self")) <= length
    return long_context_profile(trace)


def test_tiny_gemma_draws_distance_and_sink_views_from_core_numbers(gemma_dir):
    at = open_app({"model": gemma_dir, "length": "64", "layer": "0"}, page=PAGE)
    assert not page_errors(at), page_errors(at)
    assert [c.key for c in at.get("plotly_chart") if c.key] == ["long-context-grid", "long-context-distance",
                                                                "long-context-sink"]
    profile = _direct(gemma_dir, 64)
    np.testing.assert_allclose(_z(at, "long-context-grid"), profile.local, atol=1e-6)
    distance = _z(at, "long-context-distance")
    np.testing.assert_allclose(distance[:-1], profile.shares[0], atol=1e-6)  # heads, then uniform as the last row
    np.testing.assert_allclose(distance[-1], profile.uniform[0], atol=1e-6)
    sink = _z(at, "long-context-sink")  # 63 query positions: one per cell, no block averaging
    np.testing.assert_allclose(sink[:-1], profile.sink[0][:, 1:], atol=1e-6)
    np.testing.assert_allclose(sink[-1], profile.sink_uniform[0, 1:], atol=1e-6)
    text = _text(at)
    local = int((profile.local >= 0.5).sum() - ((profile.local >= 0.5) & (profile.sink_mean >= 0.5)).sum())
    assert f"Of the {profile.far.size} heads, {local} are local" in text
    assert "1 of 2 layers (0) have a sliding window of 4 tokens" in text
    assert "the largest share any head of those layers puts past its window is 0.0%" in text
    assert "Alice's Adventures in Wonderland" in text
    assert f"{profile.num_tokens:,} tokens; distance is query − key" in text
    # issue 50, item 13: the screen reader's text of each figure is plain, with no markdown escape such as "\("
    alts = [h.proto.body for h in at.get("html") if 'class="figure-alt"' in h.proto.body]
    assert len(alts) == 3 and any("(position 0; this tokenizer adds no token before the text)" in a for a in alts), alts
    for alt in alts:
        assert not re.search(r"\\[()\[\]_*.#`!<>-]", alt), alt


def test_the_layer_and_measure_change_the_figures(gemma_dir):
    at = open_app({"model": gemma_dir, "length": "64", "layer": "1", "measure": "sink"}, page=PAGE)
    assert not page_errors(at), page_errors(at)
    profile = _direct(gemma_dir, 64)
    np.testing.assert_allclose(_z(at, "long-context-grid"), profile.sink_mean, atol=1e-6)
    np.testing.assert_allclose(_z(at, "long-context-distance")[:-1], profile.shares[1], atol=1e-6)
    assert "sliding window: 4 tokens" not in json.dumps([c.proto.spec for c in at.get("plotly_chart")])


def test_an_encoder_reads_the_sidebar_s_hostile_text_escaped(tiny_bert_dir):
    at = open_app({"model": tiny_bert_dir, "source": "sidebar", "text": HOSTILE}, page=PAGE)
    assert not page_errors(at), page_errors(at)
    text = _text(at)
    assert "|query − key|" in text and "the “[CLS]” token the tokenizer adds" in text
    assert "declares no sliding window: in every layer a query sees every token" in text
    for m in at.markdown:
        assert not re.search(r"(?<!\\)<(script|img)", m.value), m.value


def test_a_stopped_measurement_says_so_and_measures_again_on_request(gemma_dir):
    """The Stop button's callback keeps the measurement's key in the session; the page then computes nothing until
    "Measure again" (a length no other test here measures, so nothing is cached yet)."""
    from streamlit.testing.v1 import AppTest

    from core.attention_heads.retrieval import bundled_haystack, haystack_of_length
    from core.model.models import load_model
    from tests.test_app import APP

    tokenizer = load_model(gemma_dir).tokenizer
    text = haystack_of_length(tokenizer, bundled_haystack(), 16 - len(tokenizer("")["input_ids"]))
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update({"model": gemma_dir, "length": "16"})
    at.session_state["_long_context_stopped"] = (gemma_dir, text, 16)
    at.switch_page(PAGE)
    at.run()
    assert not page_errors(at), page_errors(at)
    assert "You stopped the measurement" in " ".join(i.value for i in at.info)
    assert not [c for c in at.get("plotly_chart") if c.key]
    next(b for b in at.button if b.label == "Measure again").click().run()
    assert not page_errors(at), page_errors(at)
    assert [c.key for c in at.get("plotly_chart") if c.key][:1] == ["long-context-grid"]


def test_a_hostile_first_token_is_escaped_in_the_sink_sentences(gemma_dir):
    """The tiny Gemma's tokenizer adds no token before the text, so the sink is the text's own first token."""
    at = open_app({"model": gemma_dir, "source": "sidebar", "text": "<img src=x onerror=alert(1)> " * 4}, page=PAGE)
    assert not page_errors(at), page_errors(at)
    assert "the first token “<”" in _text(at)
    for element in list(at.markdown) + list(at.caption):
        assert not re.search(r"(?<!\\)<(script|img)", element.value), element.value
