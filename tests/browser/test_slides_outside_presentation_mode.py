"""Every page's default view and every tour step outside presentation mode, as people read the page itself: the
same measurements as ``test_slides`` (whose helpers, pages and prompts this file shares) at the page's own size, in
1280 × 720 (the narrowest desktop window of ``VIEWPORTS``, whose figures are the wider ones' too), a 1024 × 768 laptop
with its sidebar open and a 390 × 844 phone (figures fitted to the main column the browser measured, ``ui.viewport``;
side-by-side figures stacked; ``slide_checks.PAGE_VIEWPORTS``); every figure saved as SVG with its camera button and
measured alone; axe-core for WCAG 2 A/AA in the light and the dark theme on the same page load.

That is ``make test-full`` (``FULL_MATRIX=1``). ``make test`` opens here only the pages that had narrow-screen
defects (``matrix.NARROW_DEFECTS``: measured in the two narrow windows, opened directly in the laptop's) or lost text
in their exported figures (``matrix.EXPORT_DEFECTS``: every figure saved as SVG at 1280 × 720 first); every page is
opened outside presentation mode, with axe-core, by ``test_hostile.test_a_crafted_link_runs_nothing``.

A file of its own so that `make test` (``--dist loadfile``) runs it on one worker while ``test_slides`` runs on the
other.
"""
from __future__ import annotations

import pytest

from tests.browser.axe import violations_in_light_and_dark
from tests.browser.conftest import AppPage
from tests.browser.matrix import EXPORT_DEFECTS, FULL, FULL_MATRIX, NARROW_DEFECTS, NO_FIGURE_YET, full_only
from tests.browser.slide_checks import NARROW_VIEWPORTS, PAGE_VIEWPORTS, measure_exported_svg
from tests.browser.test_slides import (  # noqa: F401 (fixtures: this module builds its own of each)
    FIGURES,
    LM_PROMPTS,
    NOT_AN_LM,
    PAGES,
    TOUR_STEPS,
    download_figure,
    open_slide_page,
    problems_at_every_size,
    tab,
    tiny_gpt2_lm,
)

pytestmark = pytest.mark.browser


def _saved_on_a_desktop_then_every_size(tab: AppPage, narrow: bool = True) -> list[str]:
    """``problems_at_every_size`` over ``PAGE_VIEWPORTS``, with every figure saved as SVG and measured alone
    (``_exported_svg_problems``) while the window is still a desktop's, as a desktop user saves it: before the narrower
    windows rather than after them, which saves the resize back and the rerun it causes. ``narrow``: measure the
    narrow windows too."""
    problems = problems_at_every_size(tab, [v for v in PAGE_VIEWPORTS if v not in NARROW_VIEWPORTS])
    problems += _exported_svg_problems(tab)
    return problems + (problems_at_every_size(tab, NARROW_VIEWPORTS) if narrow else [])


def _exported_svg_problems(tab: AppPage) -> list[str]:
    """Every drawn figure of the page saved as SVG (the sidebar's format) and measured alone at its export size."""
    problems = []
    figures = tab.page.locator(FIGURES)
    saved = []
    for index in range(figures.count()):
        figure = figures.nth(index)
        if figure.evaluate("f => f.getBoundingClientRect().width > 0"):  # not folded away in an expander
            saved.append(download_figure(tab, figure))
    assert saved, "no figure could be saved"
    viewer = tab.page.context.new_page()
    try:
        for name, svg in saved:
            assert name.endswith(".svg"), name
            problems += [f"exported {name}: {p}" for p in measure_exported_svg(viewer, svg.decode("utf-8"))]
    finally:
        viewer.close()
    return problems


# make test: the pages that had narrow-screen or export defects; make test-full: every page
KEPT = [path if path in NARROW_DEFECTS or path in EXPORT_DEFECTS else full_only(path) for path in PAGES]


def _first_window(path: str) -> tuple[int, int]:
    """Where the page opens: the first desktop window where its figures are saved (1280 × 720; full HD in ``make
    test-full``), else straight in the laptop's window, as a link opened there."""
    return PAGE_VIEWPORTS[0] if FULL_MATRIX or path in EXPORT_DEFECTS else NARROW_VIEWPORTS[0]


@pytest.mark.parametrize("path", KEPT, ids=[p or "home" for p in PAGES])
def test_default_view_fits_every_screen_and_passes_axe_outside_presentation_mode(tab, tiny_gpt2_lm, path):
    """The same measurement at the page's own size: sidebar open, the theme's fonts, every figure of the page; then
    every figure as its camera button saves it (SVG), measured alone at its export size (issue 28: exported PNGs
    lost legend entries and titles that the page showed whole)."""
    problems = []
    window = _first_window(path)
    if path in NOT_AN_LM and FULL_MATRIX:  # the bundled model has no head: its sentence, then a model with a head
        page = open_slide_page(tab, path, {}, figures=False, present=False, window=window)
        page.wait_for_selector(f"text={NOT_AN_LM[path]}")
        problems += violations_in_light_and_dark(page)
    if path in NO_FIGURE_YET:  # no figure until a pin or a room: its sentence, controls and sidebar fit every screen
        page = open_slide_page(tab, path, {}, figures=False, present=False, window=window)
        page.wait_for_selector(f"text={NO_FIGURE_YET[path]}")
        problems += violations_in_light_and_dark(page) + problems_at_every_size(tab, NARROW_VIEWPORTS)
        assert not problems, "\n".join(problems)
        return
    query = {"model": tiny_gpt2_lm} | LM_PROMPTS.get(path, {}) if path in NOT_AN_LM else {}
    page = open_slide_page(tab, path, query | {"img": "SVG"}, present=False, window=window)
    assert page.locator(FIGURES).count() >= 1
    if FULL_MATRIX:
        problems += violations_in_light_and_dark(page) + _saved_on_a_desktop_then_every_size(tab)
    elif path in EXPORT_DEFECTS:
        problems += _saved_on_a_desktop_then_every_size(tab, narrow=path in NARROW_DEFECTS)
    else:
        problems += problems_at_every_size(tab, NARROW_VIEWPORTS)
    assert not problems, "\n".join(problems)
    tab.assert_clean()


@FULL  # make test measures the steps in presentation mode (test_slides) and walks them on a page (test_tour)
@pytest.mark.parametrize("step", TOUR_STEPS)
def test_every_tour_step_outside_presentation_mode_fits_every_screen_and_passes_axe(tab, step):
    page = open_slide_page(tab, "tour", {"step": str(step), "img": "SVG"}, present=False, window=PAGE_VIEWPORTS[0])
    page.wait_for_selector(f"text=Step {step} of")
    problems = violations_in_light_and_dark(page) + _saved_on_a_desktop_then_every_size(tab)
    assert not problems, "\n".join(problems)
    tab.assert_clean()
