"""Presentation mode on a projector: every page's default view fits 1920 × 1080, 1366 × 768 and 1280 × 720.

One tab is reused for every page; each page is loaded once per text in full HD and measured there, in the light and
the dark theme. ``make test`` measures the tour's steps again in the 1280 × 720 window (issue 28: a step did not fit
a 1280 × 720 projector), which leaves the figures' texts the least room of the three (``slide_checks``: the 1366 × 768
window gets full HD's figures, fitted for a 1232-pixel column, drawn 1318 wide); ``make test-full`` (``FULL_MATRIX=1``)
measures every page and step in every window. Measured from the drawn
SVG: no title, axis title, tick label, annotation, colour bar title or legend entry outside its figure, no two of these
texts over each other (rotated ones compared as oriented rectangles), no colour bar or legend over the plotting area.
Then the camera button must save a 1920 × 1080 PNG named after the model and the view. The same holds outside
presentation mode, where the page is also measured on a 1024 × 768 laptop with its sidebar open and a 390 × 844 phone,
and every figure is saved as SVG and measured alone: ``test_slides_outside_presentation_mode.py``, a file of its own
so that the two run on the two test workers at once. axe-core (WCAG 2 A/AA, ``tests/browser/axe.py``) runs once per
page in ``make test``, outside presentation mode (``test_hostile.test_a_crafted_link_runs_nothing``); ``make
test-full`` also runs it here on each default view and tour step, in the light and the dark theme.
"""
from __future__ import annotations

import io

import pytest
from PIL import Image

from tests.browser.axe import dark_theme, require_axe, violations_in_light_and_dark
from tests.browser.conftest import EVERY_CHART_DRAWN, AppPage
from tests.browser.matrix import FULL, FULL_MATRIX, NO_FIGURE_YET
from tests.browser.slide_checks import (
    NARROW_VIEWPORTS,
    PAGE_FIGURES,
    PROJECTOR_VIEWPORTS,
    REFITTED_JS,
    SLIDE_VIEWPORTS,
    VIEWPORTS,
    long_text,
    measure,
    resize_and_wait_for_measurement,
)
from tests.model_factory import build_tiny_gpt2_lm
from tests.pages_registry import landed_pages

pytestmark = pytest.mark.browser

PAGES = [path for _, path in landed_pages()]
# Pages whose figures draw the sidebar's text (the others have their own inputs or corpus).
TEXT_PAGES = ["", "attention", "maxima", "stats", "inside"]
NO_HEAD = "has no language-model head"  # the predictions page on the bundled model draws no figure
# What the language-model pages say on the bundled encoder instead of a figure; they are measured on a tiny GPT-2 LM.
NOT_AN_LM = {"predictions": NO_HEAD, "patching": "is not a causal language model",
             "needle": "is not a causal language model"}
# The tiny LM's tokenizer splits the Patching page's example names into letters: prompts whose answer and wrong token
# are one token each in its vocabulary, and which differ in one token.
LM_PROMPTS = {"patching": {"clean": "We sat on the bank and the", "corrupted": "We sat on a bank and the",
                           "answer": " bank", "wrong": " the"},
              # short enough for the tiny model's 64 positions with a 16-token haystack; the answer is in the needle
              "needle": {"needle": "A cat.", "question": "Who?", "answer": " cat", "length": "16"}}
# The first page a fresh server draws also holds a hidden, empty chart that loads Plotly early (ui.startup).
FIGURES = PAGE_FIGURES
CAMERA = '.modebar-btn[data-title^="Download plot"]'
# Tour steps after the first (the first is the tour's default view, checked with every page); on the
# bundled model each draws its one live figure through ``as_slide`` in presentation mode.
TOUR_STEPS = list(range(2, 11))


@pytest.fixture(scope="module")
def tab(browser, app_server):
    require_axe()
    tab = AppPage(browser, app_server)
    yield tab
    tab.close()


@pytest.fixture(scope="module")
def tiny_gpt2_lm(tmp_path_factory):
    return str(build_tiny_gpt2_lm(tmp_path_factory.mktemp("slides") / "tiny-gpt2-lm"))


def open_slide_page(tab: AppPage, path: str, query: dict[str, str], *, figures: bool = True, present: bool = True,
          window: tuple[int, int] = VIEWPORTS[0]):
    """Open ``path`` (in presentation mode unless ``present`` is False) in a ``window``-sized window; wait until every
    chart of the page has drawn.

    Presentation mode opens in full HD and is then measured in the windows of ``SLIDE_VIEWPORTS``: opened directly
    at 1280 × 720, the column probe reports its column during the first run (``ui.viewport``), and twice under the
    suite's load a page then drew its figure for the page instead of the slide (its PNG 1920 × 1187 or × 983, not
    1080; never when run alone; noted as a defect, not yet understood)."""
    tab.page.set_viewport_size(dict(zip(("width", "height"), window)))
    page = tab.open(path, ({"present": "true"} if present else {}) | query, timeout_ms=300_000)
    assert not tab.error_texts(), tab.error_texts()
    page.wait_for_function(EVERY_CHART_DRAWN, timeout=120_000)
    if figures:
        page.wait_for_function(
            """() => { const charts = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stPlotlyChart"]')]
                       .filter(c => !c.closest('.st-key-plotly-preload'));
                       return charts.length > 0 && charts.every(c => c.querySelector('.js-plotly-plot .main-svg')); }""",
            timeout=120_000,
        )
    return page


def _resize(tab: AppPage, width: int, height: int) -> None:
    """Set the window's size and wait until the page has been drawn for it."""
    resize_and_wait_for_measurement(tab.page, width, height)  # the page measures its column again
    tab.page.wait_for_function(REFITTED_JS, timeout=120_000)  # a narrower column reran the page: figures refitted
    # Wait until the rerun has ended (a phone folds the sidebar); REFITTED_JS has already seen the refit drawn, so the
    # idle state need only hold briefly.
    tab.wait_until_idle(settle_ms=150, require_sidebar=False)


def problems_at_every_size(tab: AppPage, viewports=SLIDE_VIEWPORTS) -> list[str]:
    problems = []
    for width, height in viewports:
        _resize(tab, width, height)
        problems += [f"{width}×{height}: {p}" for p in measure(tab.page)]
        if (width, height) in NARROW_VIEWPORTS:  # a link's label wraps; it was cut at the column's edge (Home's list)
            cut = tab.page.evaluate("""() => [...document.querySelectorAll('[data-testid="stPageLink-NavLink"]')]
                .filter(a => [a, ...a.querySelectorAll('*')].some(e => e.scrollWidth > e.clientWidth + 1))
                .map(a => a.textContent.trim().slice(0, 50))""")
            problems += [f"{width}×{height}: the link “{text}” is cut at the column's edge" for text in cut]
    return problems


def _axe_in_presentation_mode(page) -> list[str]:
    """axe-core in presentation mode, in the light and the dark theme, in ``make test-full`` only: its own CSS is the
    same on every page, and ``make test`` runs axe-core once on every page outside presentation mode
    (``test_hostile``)."""
    return violations_in_light_and_dark(page) if FULL_MATRIX else []


def _in_dark_theme(tab: AppPage) -> list[str]:
    """The same measurement after the system switches to a dark colour scheme (Streamlit follows it)."""
    with dark_theme(tab.page):
        return [f"dark theme: {p}" for p in measure(tab.page)]


def download_figure(tab: AppPage, figure) -> tuple[str, bytes]:
    """Click ``figure``'s camera button as a person would (see ``_download_png``); the file's name and bytes."""
    page = tab.page
    camera = figure.locator(CAMERA)
    camera.evaluate("button => button.scrollIntoView({block: 'center', inline: 'nearest'})")
    figure.hover()  # Plotly shows its toolbar while the pointer is over the figure
    with page.expect_download(timeout=60_000) as download:
        camera.click()
    saved = download.value
    # Plotly's "Taking snapshot…" / "Snapshot succeeded" boxes covered the figure's top right (issue 28)
    notices = page.locator(".plotly-notifier").evaluate_all(
        "els => els.filter(e => e.getBoundingClientRect().height > 0).map(e => e.textContent)")
    assert not notices, f"Plotly's download notices are drawn over the page: {notices}"
    with open(saved.path(), "rb") as handle:
        return saved.suggested_filename, handle.read()


def _download_png(tab: AppPage) -> tuple[str, tuple[int, int]]:
    """Click the first figure's camera button; return the file name and the PNG's pixel size.

    The button sits at the figure's top right corner. A figure taller than the window (the attention
    overview at 1280 × 720) scrolled into view puts that corner under Streamlit's fixed header, where a
    click lands on the header and saves nothing, as it would for a person; so the button itself is
    scrolled to the middle of the window, and clicked as a person would (no forced click: Playwright
    refuses a click that something else would receive).
    """
    name, data = download_figure(tab, tab.page.locator(FIGURES).first)
    return name, Image.open(io.BytesIO(data)).size


@pytest.mark.parametrize("path", PAGES, ids=[p or "home" for p in PAGES])
def test_default_view_fits_every_screen_exports_a_slide_and_passes_axe(tab, tiny_gpt2_lm, path):
    page = open_slide_page(tab, path, {}, figures=path not in NOT_AN_LM and path not in NO_FIGURE_YET)
    problems = _axe_in_presentation_mode(page)
    if path in NO_FIGURE_YET:  # its sentence, its controls and the sidebar fit every screen in both themes
        page.wait_for_selector(f"text={NO_FIGURE_YET[path]}")
        assert page.locator(FIGURES).count() == 0
        problems += problems_at_every_size(tab) + _in_dark_theme(tab)
        assert not problems, "\n".join(problems)
        tab.assert_clean()
        return
    if path in NOT_AN_LM:
        page.wait_for_selector(f"text={NOT_AN_LM[path]}")
        assert page.locator(FIGURES).count() == 0
        page = open_slide_page(tab, path, {"model": tiny_gpt2_lm} | LM_PROMPTS.get(path, {}))  # a model with a head draws its figure
        problems += _axe_in_presentation_mode(page)
    assert page.locator(FIGURES).count() >= 1
    problems += problems_at_every_size(tab) + _in_dark_theme(tab)
    assert not problems, "\n".join(problems)

    name, size = _download_png(tab)  # in the last window measured (1280 × 720 in make test-full)
    assert size == (1920, 1080), f"{name} is {size[0]} × {size[1]} pixels"
    assert name.endswith(".png") and ("tiny-gpt2-lm" if path in NOT_AN_LM else "all-MiniLM-L6-v2") in name, name
    tab.assert_clean()


@pytest.mark.parametrize("step", TOUR_STEPS)
def test_every_tour_step_fits_every_screen_and_passes_axe(tab, step):
    page = open_slide_page(tab, "tour", {"step": str(step)})
    page.wait_for_selector(f"text=Step {step} of")
    assert page.locator(FIGURES).count() == 1  # each step's one live figure, drawn through as_slide
    problems = _axe_in_presentation_mode(page) + problems_at_every_size(tab, PROJECTOR_VIEWPORTS)
    assert not problems, "\n".join(problems)
    name, size = _download_png(tab)
    assert size == (1920, 1080), f"{name} is {size[0]} × {size[1]} pixels"
    assert name.endswith(".png") and name.startswith("all-MiniLM-L6-v2-tour"), name
    tab.assert_clean()


@FULL  # an input × page matrix: make test-full
@pytest.mark.parametrize("path", TEXT_PAGES, ids=[p or "home" for p in TEXT_PAGES])
def test_a_512_token_text_fits_every_screen(tab, path):
    page = open_slide_page(tab, path, {"text": long_text()})
    page.wait_for_selector("text=only the first 512 are shown")  # the bundled model's whole window is drawn
    assert page.locator(FIGURES).count() >= 1
    problems = problems_at_every_size(tab)
    assert not problems, "\n".join(problems)
    tab.assert_clean()


@pytest.mark.parametrize("heads", ["L0H2 L3H5", "L0H1"], ids=["two-heads-bundled", "one-head-causal-lm"])
def test_effects_with_knocked_out_heads_fits_every_screen(tab, tiny_gpt2_lm, heads):
    """Figures side by side: the knocked-out heads' attention (one column each) and, on a model with a
    head, the predictions before and after (two columns); each is fitted to its column's share."""
    query = {"heads": heads} | ({"model": tiny_gpt2_lm} if heads == "L0H1" else {})
    page = open_slide_page(tab, "effects", query)
    page.wait_for_selector("text=After the knock-out" if "model" in query else "text=Cosine, original vs ablated",
                           timeout=300_000)
    page.wait_for_function(EVERY_CHART_DRAWN, timeout=120_000)
    problems = problems_at_every_size(tab)
    assert not problems, "\n".join(problems)
    tab.assert_clean()
