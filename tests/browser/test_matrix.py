"""What ``make test`` keeps of the browser tier still covers every page (no browser needed: read from the tests'
parameters). ``make test-full`` (``FULL_MATRIX=1``) opens every combination; ``make test`` the ones not marked
``full`` (``tests/browser/matrix.py``). A page added to app.py's PAGES is in every pass below without a change here;
one left out of a pass, or a pass cut to fewer pages, fails."""

from __future__ import annotations

import pytest

from tests.browser import test_every_page_on_smollm2, test_hostile, test_seq2seq, test_slides, test_slides_outside_presentation_mode, test_tour
from tests.browser.matrix import EXPORT_DEFECTS, NARROW_DEFECTS, in_turn, theme
from tests.pages_registry import landed_pages

PAGES = [path for _, path in landed_pages()]


def _in_make_test(test) -> list[tuple]:
    """The parameter values ``make test`` runs ``test`` with: its ``parametrize`` values less those marked ``full``
    (none when the test itself is marked ``full``)."""
    marks = getattr(test, "pytestmark", [])
    if any(mark.name == "full" for mark in marks):
        return []
    (values,) = [mark.args[1] for mark in marks if mark.name == "parametrize"]
    kept = []
    for value in values:
        if hasattr(value, "marks"):  # a pytest.param
            if any(mark.name == "full" for mark in value.marks):
                continue
            value = value.values
        kept.append(value if isinstance(value, tuple) else (value,))
    return kept


def test_make_test_opens_every_page_once_per_kind_of_model():
    encoder = [path for (path,) in _in_make_test(test_hostile.test_a_crafted_link_runs_nothing)]
    language_model = [path for path, _extra in _in_make_test(test_every_page_on_smollm2.test_view_paints_on_smollm2)]
    encoder_decoder = [path for path, _model in _in_make_test(test_seq2seq.test_a_hostile_deep_link_runs_nothing_on_an_encoder_decoder)]
    assert encoder == PAGES and language_model == PAGES and encoder_decoder == PAGES
    models = {model for _path, model in _in_make_test(test_seq2seq.test_a_hostile_deep_link_runs_nothing_on_an_encoder_decoder)}
    assert models == set(test_seq2seq.MODELS)  # both encoder-decoder models, in turn


def test_make_test_opens_every_page_in_presentation_mode_and_the_tour_steps_on_a_projector():
    assert [path for (path,) in _in_make_test(test_slides.test_default_view_fits_every_screen_exports_a_slide_and_passes_axe)] == PAGES
    assert [step for (step,) in _in_make_test(test_slides.test_every_tour_step_fits_every_screen_and_passes_axe)] == test_slides.TOUR_STEPS


def test_the_encoder_pass_alternates_the_themes_and_runs_axe_on_every_page():
    assert {theme(PAGES.index(path)) for (path,) in _in_make_test(test_hostile.test_a_crafted_link_runs_nothing)} == {"light", "dark"}


def test_the_narrow_windows_and_exports_are_measured_on_the_pages_that_had_those_defects():
    outside = test_slides_outside_presentation_mode.test_default_view_fits_every_screen_and_passes_axe_outside_presentation_mode
    assert set(NARROW_DEFECTS) | EXPORT_DEFECTS <= set(PAGES), "a defect's page is no longer in app.py"
    assert {path for (path,) in _in_make_test(outside)} == set(NARROW_DEFECTS) | EXPORT_DEFECTS


def test_the_tours_hostile_deep_links_open_every_step_and_both_models():
    kept = _in_make_test(test_tour.test_every_step_from_a_deep_link_with_hostile_text)
    assert sorted(step for step, _model in kept) == list(range(1, test_tour.STEPS + 1))
    assert {model for _step, model in kept} == {None, "tiny_gpt2_dir"}


@pytest.mark.parametrize(("rows", "columns"), [(["a", "b", "c"], [1, 2]), (["a", "b"], [1, 2]), (["a"], [1])])
def test_in_turn_keeps_each_row_once_and_every_column_and_marks_the_other_pairs_full(rows, columns):
    pairs = in_turn(rows, columns)
    kept = [p for p in pairs if not hasattr(p, "marks")]
    full = [p.values for p in pairs if hasattr(p, "marks")]
    assert [row for row, _ in kept] == rows and {column for _, column in kept} == set(columns)
    assert sorted(kept + full) == sorted((r, c) for r in rows for c in columns)  # make test-full: every pair
    assert all(mark.name == "full" for p in pairs if hasattr(p, "marks") for mark in p.marks)
    with pytest.raises(ValueError):
        in_turn(rows[:1], columns + [99])


def test_every_browser_test_kept_in_make_test_exists_and_says_why():
    """``matrix.MAKE_TEST`` names real browser tests (a renamed test would otherwise leave ``make test`` silently)."""
    import ast
    import pathlib

    from tests.browser.matrix import MAKE_TEST

    folder = pathlib.Path(__file__).parent
    tests = {f"{path.stem}::{node.name}" for path in folder.glob("test_*.py")
             for node in ast.parse(path.read_text(encoding="utf-8")).body
             if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}
    assert set(MAKE_TEST) - tests == set()
    assert all(reason.strip() for reason in MAKE_TEST.values())
    assert len(tests - set(MAKE_TEST)) > 0  # the rest is make test-full's
