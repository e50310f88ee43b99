"""DRAFT, not collected by pytest (the file name does not start with ``test_``): the effects page on a tiny
masked LM and a tiny causal LM in Chromium.

It passed when the page landed, then on the merged main it twice failed: once the before/after bars had not
painted when it counted them (now waited for), and once, on an idle machine, the logit-lens sentence never
appeared within 400 s although the server had finished the script (py-spy showed no script thread running).
The causal-LM test also failed on the merged main: the lens sentence appeared but the knock-out's "Cosine,
original vs ablated sentence embedding" metric did not, so part 1 of the page seems not to get the linked
``heads`` / ``measure`` in the browser. The same page and query render completely in AppTest (tests/test_effects_page.py). Find out what the browser
shows (screenshot at the timeout), fix it, and move this test back into test_effects.py.
"""

from __future__ import annotations

import pytest

from tests.model_factory import build_tiny_bert_mlm, build_tiny_gpt2_lm

pytestmark = pytest.mark.browser

# The page runs the model ~100 times (importance map, integrated gradients); on a shared, loaded machine that is minutes.
LOADED_MACHINE_MS = 400_000
ATTACK = "<img src=x onerror=alert('img')> the [MASK] <script>alert(1)</script> ![x](http://example.com/x.png) sat"


def test_masked_lm_shows_before_after_and_the_lens(app_page, tmp_path):
    folder = build_tiny_bert_mlm(tmp_path / "tiny-bert-mlm")
    query = {"model": str(folder), "text": ATTACK, "heads": "L1H0"}
    page = app_page.open("effects", query, timeout_ms=LOADED_MACHINE_MS)
    page.wait_for_selector("text=is the top token from hidden state", timeout=LOADED_MACHINE_MS)
    page.wait_for_selector("text=After the knock-out", timeout=LOADED_MACHINE_MS)  # the bars paint after the lens text
    assert page.locator("text=After the knock-out").count() == 1
    assert page.locator(".js-plotly-plot .heatmaplayer text").count() > 0  # the lens grid writes its tokens
    _no_injection(page)
    app_page.assert_clean()


def test_causal_lm_with_hostile_text(app_page, tmp_path):
    folder = build_tiny_gpt2_lm(tmp_path / "tiny-gpt2-lm")
    query = {"model": str(folder), "text": ATTACK, "heads": "L0H1", "measure": "sentence embedding"}
    page = app_page.open("effects", query, timeout_ms=LOADED_MACHINE_MS)
    page.wait_for_selector("text=is the top token from hidden state", timeout=LOADED_MACHINE_MS)
    assert page.locator("text=Cosine, original vs ablated sentence embedding").count() == 1
    _no_injection(page)
    app_page.assert_clean()
