"""Twenty sessions at once on one server: each sees its own text, the model loads once, memory stays bounded."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import CHROMIUM, CHROMIUM_FLAGS, _require_browser, serve_app
from tests.browser.load import PeakRSS, run_load

pytestmark = pytest.mark.browser

SESSIONS = 20
# The bundled model, 20 cached analyses, Streamlit and its session state fit well under this.
RSS_BOUND_BYTES = 3 * 1024**3


def test_twenty_concurrent_sessions_get_their_own_results(tmp_path):
    _require_browser()
    log_path = tmp_path / "server.log"
    with serve_app(log_path) as (url, proc), PeakRSS(proc.pid) as rss:
        results = run_load(url, SESSIONS, executable=CHROMIUM, args=CHROMIUM_FLAGS)
    failed = [(r.word, r.errors) for r in results if not r.own_word_shown or r.errors]
    assert not failed, failed
    leaked = [(r.word, r.foreign_words) for r in results if r.foreign_words]
    assert not leaked, f"another session's text reached a page: {leaked}"
    assert not any(r.blocked for r in results)
    loads = re.findall(r"loaded model (\S+) in", log_path.read_text())
    assert loads == ["all-MiniLM-L6-v2"], f"model loads seen in the server log: {loads}"
    assert 0 < rss.peak < RSS_BOUND_BYTES, f"peak RSS {rss.peak / 1e9:.2f} GB"
