"""Twenty sessions at once on one server: each sees its own text, the model loads once, memory stays bounded.

The sessions are protocol-level clients (Streamlit's own websocket messages, ``bench.protocol``): session isolation,
the single model load and the memory bound are properties of the server, and twenty of these cost the test a few
seconds where twenty Chromium tabs cost it minutes. That the browser draws what arrives is the other browser tests'.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from bench.protocol import run_apart, view_page
from tests.browser.conftest import serve_app
from tests.browser.load import SESSION_WORDS, PeakRSS, session_text

pytestmark = pytest.mark.browser

SESSIONS = 20
# The bundled model, 20 cached analyses, Streamlit and its session state fit well under this.
RSS_BOUND_BYTES = 3 * 1024**3


def _tick_labels(spec: str) -> set[str]:
    """Every x-axis tick label and category of a Plotly spec (where the home figure puts the tokens)."""
    figure = json.loads(spec)
    labels: set[str] = set()
    for trace in figure.get("data", []):
        labels.update(str(x) for x in trace.get("x", []) or [] if isinstance(x, str))
    for key, axis in figure.get("layout", {}).items():
        if key.startswith("xaxis"):
            labels.update(str(t) for t in axis.get("ticktext", []) or [])
    return labels


def _tracebacks(log: str) -> list[str]:
    """Each traceback of the server's log, from its first line to the exception's line."""
    return re.findall(r"Traceback \(most recent call last\):\n(?:[ \t].*\n)+\S.*", log)


async def _all_sessions(url: str, words: list[str]):
    return await asyncio.gather(*(view_page(url, "", {"text": session_text(w)}, timeout=300) for w in words))


def test_twenty_concurrent_sessions_get_their_own_results(tmp_path):
    log_path = tmp_path / "server.log"
    words = SESSION_WORDS[:SESSIONS]
    with serve_app(log_path) as (url, proc), PeakRSS(proc.pid) as rss:
        views = run_apart(_all_sessions(url, words))
    failed = [(w, v.errors) for w, v in zip(words, views) if v.errors or not v.figures]
    # the page shows a redacted message; the server's log holds what raised
    assert not failed, (failed, _tracebacks(log_path.read_text()))
    shown = {w: set().union(*(_tick_labels(f) for f in v.figures)) for w, v in zip(words, views)}
    missing = [w for w in words if w not in shown[w]]
    assert not missing, f"sessions whose figure lacks their own word: {missing}"
    leaked = {w: sorted(set(words) - {w} & shown[w]) for w in words if set(words) - {w} & shown[w]}
    assert not leaked, f"another session's text reached a page: {leaked}"
    loads = re.findall(r"loaded model (\S+) in", log_path.read_text())
    assert loads == ["all-MiniLM-L6-v2"], f"model loads seen in the server log: {loads}"
    assert 0 < rss.peak < RSS_BOUND_BYTES, f"peak RSS {rss.peak / 1e9:.2f} GB"
