"""The "Does it matter?" page in a real browser: bundled model (no head), a masked LM and a causal LM, hostile text."""

from __future__ import annotations

import pytest

from tests.browser.conftest import drawn_count
from tests.model_factory import build_tiny_bert_mlm, build_tiny_gpt2_lm

pytestmark = pytest.mark.browser

# The page runs the model ~100 times (importance map, integrated gradients); on a shared, loaded machine that is minutes.
LOADED_MACHINE_MS = 400_000
ATTACK = "<img src=x onerror=alert('img')> the [MASK] <script>alert(1)</script> ![x](http://example.com/x.png) sat"


def _no_injection(page) -> None:
    assert page.locator('[data-testid="stMain"] img[src="x"]').count() == 0
    assert page.locator('[data-testid="stMain"] script:not([src])', has_text="alert").count() == 0


def test_bundled_model_without_head_shows_parts_one_to_three(app_page):
    query = {"text": ATTACK, "heads": "L0H2", "ablation": "mean"}
    page = app_page.open("effects", query, timeout_ms=LOADED_MACHINE_MS)
    page.wait_for_selector("text=Cosine, original vs ablated sentence embedding", timeout=LOADED_MACHINE_MS)
    assert page.locator("text=has no language-model head").count() >= 1
    assert page.locator("text=Completeness gap").count() == 1
    # the knocked-out head's attention, the importance map, attention to the token, the attribution bars
    assert page.locator(".js-plotly-plot .heatmaplayer").count() >= 3
    assert page.locator(".js-plotly-plot .barlayer").count() >= 1
    assert page.locator("text=Spearman's ρ of a head's effect").count() == 1
    assert page.get_by_role("heading", name="4. Logit lens").count() == 1  # its section says why it is empty
    _no_injection(page)
    app_page.assert_clean()


def test_masked_lm_shows_before_after_and_the_lens(app_page, tmp_path):
    folder = build_tiny_bert_mlm(tmp_path / "tiny-bert-mlm")
    query = {"model": str(folder), "text": ATTACK, "heads": "L1H0"}
    page = app_page.open("effects", query, timeout_ms=LOADED_MACHINE_MS)
    page.wait_for_selector("text=is the top token from hidden state", timeout=LOADED_MACHINE_MS)
    page.wait_for_selector("text=After the knock-out", timeout=LOADED_MACHINE_MS)  # the bars paint after the lens text
    assert drawn_count(page, "After the knock-out") == 1  # the figure, not its text alternative for screen readers
    # the lens grid draws; this long hostile text leaves its cells narrower than two characters, so they carry no
    # token (viz.lens_grid.fitted_cell_text; the hover names it), which tests/test_noisy_sentences.py checks per cell
    assert page.locator(".js-plotly-plot .heatmaplayer").count() > 0
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
