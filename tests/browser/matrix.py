"""Which combinations the browser tier opens in ``make test``, and which only in ``make test-full``.

A page load in Chromium costs about a CPU-second whatever it checks, so the matrices of pages × inputs, × models,
× windows and × themes are where the suite's time goes (docs/test-suite.md). ``make test`` opens every page once per
kind of model (encoder, language model, encoder-decoder) at one window, the themes alternating from page to page,
axe-core once per page, presentation mode in full HD on every page, the narrow windows on the pages that had
narrow-screen defects (``NARROW_DEFECTS``), and every regression test of a defect. ``make test-full``
(``FULL_MATRIX=1``) opens every pair: every page × every window × both themes × every degenerate input.

A combination only the full matrix opens is a ``pytest.param`` marked ``full`` (or a test marked ``full``):
``tests/conftest.py`` deselects them without ``FULL_MATRIX=1``, and pytest counts them as "deselected", never as
passed. ``tests/browser/test_matrix.py`` checks that what ``make test`` keeps still covers every page.
"""

from __future__ import annotations

import itertools
import os

import pytest

FULL_MATRIX = os.environ.get("FULL_MATRIX") == "1"
FULL = pytest.mark.full  # opened only by ``make test-full``
THEMES = ("light", "dark")

# The pages that had narrow-screen defects (390 × 844, or 1024 × 768 with the sidebar open), by url path: these are
# measured in the narrow windows in ``make test``; every page is in ``make test-full``.
NARROW_DEFECTS = {
    "": "issue 28: a link of Home's page list cut at the column's edge",
    "attention": "issue 28: the head's cell numbers 3 px and its key labels overlapping on a phone; issue 40 (14): the "
                 "overview's title under the toolbar",
    "maxima": "issue 28: words overlapping on a phone",
    "compare": "issue 28: heatmaps as strips at 1024 × 768; issue 40 (14): 31 layer ticks overlapping on a phone",
    "effects": "issue 28: heatmaps of ~60 px with head numbers piled up at 1024 × 768",
    "senses": "issue 28: the title cut at 1024 × 768",
    "predictions": "issue 40 (14): the top-next-tokens heatmap ~110 px wide on a phone",
    "inside": "issue 40 (14): the two columns so narrow at 1024 × 768 that the heading broke word by word",
    "drift": "2026-11-27 (docs/test-suite.md): opened from a link on a phone, the page reran for its column and never "
             "finished",
}
# The pages whose exported figures lost text (issue 28: the senses separation legend, the drift legend, the
# importance map's colour-bar title): every figure of these is saved as SVG and measured in ``make test``.
EXPORT_DEFECTS = {"senses", "drift", "effects"}
# Pages whose default view draws no figure until a figure is pinned or a room opened, and what they say instead
# (their figures: tests/browser/test_deck_html.py, test_room_live.py).
NO_FIGURE_YET = {"deck": "No figure is pinned yet", "room": "Open a room"}


def theme(index: int) -> str:
    """The theme of the ``index``-th page of a pass: light and dark in turn, so a pass covers both."""
    return THEMES[index % 2]


def full_only(*values):
    """A parameter set only ``make test-full`` opens."""
    return pytest.param(*values, marks=FULL)


def in_turn(rows: list, columns: list) -> list:
    """Every ``(row, column)`` pair: in ``make test`` each row once, with the columns taken in turn (so each row and
    each column is opened); the other pairs only in ``make test-full``."""
    if len(rows) < len(columns):
        raise ValueError(f"{len(rows)} rows cannot take {len(columns)} columns in turn")
    turn = {(row, columns[i % len(columns)]) for i, row in enumerate(rows)}
    return [pair if pair in turn else full_only(*pair) for pair in itertools.product(rows, columns)]
