"""Issue 26: every page and every tour step on the bundled language model (a Llama with rotary positions and
grouped-query attention) in Chromium: a figure paints, no exception or error on screen, no console error, no
request to any host but localhost, and no sentence written for an encoder ([CLS]/[SEP] belong to BERT).

``make test``'s pass over every page on a language model (``matrix``); the tour's steps on SmolLM2 are in ``make
test-full`` (``test_tour`` walks the language-model track on a tiny model and the ten steps on the MiniLM)."""

from __future__ import annotations

import pytest

from tests.browser.matrix import NO_FIGURE_YET, full_only
from tests.pages_registry import landed_pages

pytestmark = [pytest.mark.browser, pytest.mark.integration]

MODEL = "SmolLM2-135M-Instruct"
TEXT = "When Mary and John went to the store, John gave a drink to"
# The long-context page reads 2,048 tokens by default (about 40 of this test's 180 s); what is checked here is that
# its figures paint on a rotary, grouped-query model, which 256 tokens show as well (test_long_attention and
# tests/test_long_context.py test long texts).
PAGE_OPTIONS = {"long-context": {"length": "256"}}
PAGE_VIEWS = [(path, PAGE_OPTIONS.get(path, {})) for _file, path in landed_pages()]
TOUR_VIEWS = ([("tour", {"track": "lm", "step": str(s)}) for s in range(1, 6)]  # the language-model track
              + [("tour", {"track": "attention", "step": str(s)}) for s in range(1, 11)])
VIEWS = PAGE_VIEWS + [full_only(path, extra) for path, extra in TOUR_VIEWS]
PAINTED = """() => [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot:not(.st-key-plotly-preload *)')]
                   .some(p => p._fullLayout && p.data.length > 0 && p.querySelector('.main-svg'))"""


@pytest.fixture(scope="module")
def lm_server(bundled_lm, app_server):
    """The shared server; ``bundled_lm`` has converted SmolLM2 into the app's cache first."""
    return app_server


@pytest.mark.parametrize(("path", "extra"), VIEWS, ids=[f"{p or 'home'}{'-' + e['track'] + e['step'] if 'track' in e else ''}"
                                                      for p, e in PAGE_VIEWS + TOUR_VIEWS])
def test_view_paints_on_smollm2(lm_server, module_tab, path, extra):
    """``lm_server``: SmolLM2 is in the app's cache before the module's one tab opens it."""
    module_tab.forget()
    page = module_tab.open(path, {"model": MODEL, "text": TEXT, **extra}, timeout_ms=300_000)
    if path in NO_FIGURE_YET:
        page.wait_for_selector(f"text={NO_FIGURE_YET[path]}", timeout=120_000)
    else:
        page.wait_for_function(PAINTED, timeout=120_000)
    said = page.locator('[data-testid="stMain"]').inner_text()
    assert "not available for llama" not in said and "no language-model head" not in said, said[:800]
    assert "[CLS]" not in said and "[SEP]" not in said, "an encoder's sentence on a decoder: " + said[:800]
    module_tab.assert_clean()
