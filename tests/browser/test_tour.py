"""The guided tour in a real browser: "next" through every step, each step from a deep link on the bundled
model and both tiny models with hostile sidebar text, and the arrow keys."""

from __future__ import annotations

import pytest

from tests.browser.matrix import in_turn
from tests.browser.test_hostile import ATTACK, injected_texts

pytestmark = pytest.mark.browser

STEPS = 10
# The step's one figure has painted: Plotly drew its SVG and holds at least one trace.
PAINTED = """() => {
    const plot = document.querySelector('[data-testid="stMain"] .js-plotly-plot');
    return !!plot && !!plot._fullLayout && plot.data.length > 0 && !!plot.querySelector('.main-svg');
}"""
HEADER = '[data-testid="stMain"] h2'


def _wait_for_step(page, step: int) -> None:
    page.wait_for_function(
        "(n) => { const h = document.querySelector('[data-testid=\"stMain\"] h2'); return h && h.textContent.startsWith(n + ' ·'); }",
        arg=step, timeout=180_000,
    )


# A step paints its figure or, where it does not apply, says why in an info box that ends "Use Next …".
FIGURE_OR_REASON = """() => (""" + PAINTED + """)() || [...document.querySelectorAll(
    '[data-testid="stMain"] [data-testid="stAlertContentInfo"]')].some(e => e.textContent.includes('Use Next'))"""


def _figure_or_reason(page) -> str:
    """"figure" when the step painted its figure, else the sentence saying why the step does not apply (one wait
    for either: waiting for a figure that never comes cost two minutes a step)."""
    page.wait_for_function(FIGURE_OR_REASON, timeout=120_000)
    if page.evaluate(PAINTED):
        return "figure"
    reason = page.locator('[data-testid="stMain"] [data-testid="stAlertContentInfo"]', has_text="Use Next")
    assert reason.count() == 1, "the step neither painted a figure nor said why not"
    return reason.inner_text()


def test_next_walks_through_every_step_and_each_paints_its_figure(app_page):
    page = app_page.open("tour", timeout_ms=300_000)
    _wait_for_step(page, 1)
    for step in range(1, STEPS + 1):
        if step > 1:
            page.get_by_role("button", name="Next").click()
            _wait_for_step(page, step)
            app_page.wait_until_idle(timeout_ms=300_000)
            page.wait_for_function("(n) => new URLSearchParams(location.search).get('step') === String(n)", arg=step)
        page.wait_for_function(PAINTED, timeout=180_000)
        assert page.locator('[data-testid="stMain"] .js-plotly-plot').count() == 1, f"step {step} draws one figure"
        assert page.locator('[data-testid="stMain"] a', has_text="Open ").count() == 1  # the full page at the same state
    app_page.assert_clean()


def test_arrow_keys_move_between_steps(app_page):
    page = app_page.open("tour", {"step": "3"}, timeout_ms=300_000)
    _wait_for_step(page, 3)
    page.locator(HEADER).click()  # focus the page, not a text box
    page.keyboard.press("ArrowRight")
    _wait_for_step(page, 4)
    app_page.wait_until_idle(timeout_ms=300_000)
    page.keyboard.press("ArrowLeft")
    _wait_for_step(page, 3)
    app_page.wait_until_idle(timeout_ms=300_000)
    box = page.locator('[data-testid="stSidebar"] textarea')
    box.click()  # arrows inside a text box move the cursor, not the tour
    box.press("ArrowLeft")
    box.press("ArrowRight")
    page.wait_for_timeout(1500)
    app_page.wait_until_idle(timeout_ms=300_000)
    assert page.locator(HEADER).first.inner_text().startswith("3 ·")
    app_page.assert_clean()


# The bundled MiniLM (a BERT encoder) and a tiny GPT-2 (a decoder: masked cells, no [CLS]) in turn, step by step; a
# tiny BERT would draw what the MiniLM draws, tests/test_tour.py opens every step on both tiny models with hostile text
# in AppTest, and the walk through every step above paints each on the MiniLM.
@pytest.mark.parametrize(("step", "model_fixture"), in_turn(list(range(1, STEPS + 1)), [None, "tiny_gpt2_dir"]))
def test_every_step_from_a_deep_link_with_hostile_text(module_tab, step, model_fixture, request):
    query = {"step": str(step), "text": ATTACK} | ({"model": request.getfixturevalue(model_fixture)} if model_fixture else {})
    query["track"] = "attention"  # the ten steps: a language model (the tiny GPT-2's head is tied) opens on the LM track
    module_tab.forget()
    page = module_tab.open("tour", query, timeout_ms=300_000)
    _wait_for_step(page, step)
    shown = _figure_or_reason(page)
    assert shown == "figure" or model_fixture is not None, f"the bundled model must paint step {step}: {shown}"
    module_tab.wait_until_drawn()  # and what they run on load run
    assert not injected_texts(page), injected_texts(page)
    module_tab.assert_clean()


def test_the_explain_step_paints_its_knock_out_and_links_to_the_effects_page(app_page):
    page = app_page.open("tour", {"step": "9"}, timeout_ms=300_000)
    _wait_for_step(page, 9)
    page.wait_for_function(PAINTED, timeout=180_000)
    # one figure, two panels: where the heads look, and what knocking each out changes
    heads = page.evaluate("""() => {
        const plot = document.querySelector('[data-testid="stMain"] .js-plotly-plot');
        return plot._fullLayout.xaxis2 ? plot.data.filter(t => t.xaxis === 'x2').flatMap(t => t.x) : null;
    }""")
    assert heads and all(h.startswith("L") and "H" in h for h in heads), heads
    assert page.locator('[data-testid="stMain"]', has_text="not what it changes").count() == 1
    link = page.locator('[data-testid="stMain"] a', has_text="Open this knock-out")
    assert link.count() == 1
    href = link.get_attribute("href")
    assert "effects?" in href and "ablation=zero" in href, href
    app_page.assert_clean()
    page = app_page.open(href.lstrip("/"), timeout_ms=300_000)  # the link, as a new tab would open it
    box = page.get_by_role("textbox", name="Heads to knock out")
    assert box.input_value() == " ".join(heads)
    app_page.assert_clean()


LM_STEPS = 6
PATCHING_STEP = 5  # the names preset, which the tiny tokenizer cuts into pieces: the step says why


def test_the_lm_track_walks_through_its_steps_on_a_tiny_language_model(app_page, tmp_path_factory):
    """Issue 27, item 7: a causal language model opens on the LM track; Next walks its six steps, each painting its
    figure (or, for the names preset the tiny tokenizer cuts into pieces, saying why), and the switch goes back."""
    from tests.model_factory import build_tiny_gpt2_lm

    model = str(build_tiny_gpt2_lm(tmp_path_factory.mktemp("models") / "tour-lm"))
    page = app_page.open("tour", {"model": model, "text": "the cat sat on the mat"}, timeout_ms=300_000)
    _wait_for_step(page, 1)
    for step in range(1, LM_STEPS + 1):
        if step > 1:
            page.get_by_role("button", name="Next").click()
            _wait_for_step(page, step)
            app_page.wait_until_idle(timeout_ms=300_000)
        shown = _figure_or_reason(page)
        assert shown == "figure" or step == PATCHING_STEP, (step, shown)
    assert page.get_by_role("button", name="Next").is_disabled()
    assert not injected_texts(page), injected_texts(page)
    page.locator('[data-testid="stMain"] button', has_text="From tokens to a corpus").click()
    _wait_for_step(page, 1)
    page.wait_for_function("() => new URLSearchParams(location.search).get('track') === 'attention'")
    app_page.assert_clean()
