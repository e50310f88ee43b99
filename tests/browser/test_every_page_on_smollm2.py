"""Issue 26: every page and every tour step on the bundled language model (a Llama with rotary positions and
grouped-query attention), served as a learner gets it: no exception or error on screen, and a figure drawn.

Protocol-level clients (``bench.protocol``) open the pages, so the walk costs seconds per page, not a browser's
start-up; ``test_bundled_lm.py`` checks in Chromium that a link to this model paints.
"""

from __future__ import annotations

import asyncio

import pytest

from bench.protocol import view_page
from tests.pages_registry import landed_pages

pytestmark = [pytest.mark.browser, pytest.mark.integration]

MODEL = "SmolLM2-135M-Instruct"
TEXT = "When Mary and John went to the store, John gave a drink to"
TOUR_STEPS = range(1, 11)
VIEWS = [(path, {}) for _file, path in landed_pages()] + [("tour", {"step": str(s)}) for s in TOUR_STEPS]


@pytest.fixture(scope="module")
def walked(bundled_lm, app_server):
    """Every view opened in turn with the language model and a shared text; ``bundled_lm`` has converted the model
    into the app's cache first."""
    async def walk():
        return [await view_page(app_server, path, {"model": MODEL, "text": TEXT, **extra}, timeout=300)
                for path, extra in VIEWS]
    return dict(zip([f"{p or 'home'}{'?step=' + e['step'] if e else ''}" for p, e in VIEWS], asyncio.run(walk())))


@pytest.mark.parametrize("view", [f"{p or 'home'}{'?step=' + e['step'] if e else ''}" for p, e in VIEWS])
def test_view_draws_without_error_on_smollm2(walked, view):
    page = walked[view]
    assert not page.errors, page.errors
    assert page.figures, f"{view} drew no figure; it said: {[t[:120] for t in page.texts]}"
    said = " ".join(page.texts)
    assert "not available for llama" not in said and "no language-model head" not in said, said[:500]
