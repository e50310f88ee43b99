"""Which combinations the browser tier opens: each row once with the columns taken in turn, or every pair.

A page load in Chromium costs about a CPU-second whatever it checks, so a matrix of pages × inputs (or × models) is
where the suite's time goes. Each page has its own code and each input its own path through it, but an input's path
is the same on every page (escaping, token labels, an empty figure's sentence), so every page and every input is
checked in turn; the server-side battery (``tests/test_robustness.py``, AppTest) still runs every pair.
``FULL_MATRIX=1`` opens every pair here too, and measures every window and theme in the slide tests
(``slide_checks``).
"""

from __future__ import annotations

import itertools
import os

FULL_MATRIX = os.environ.get("FULL_MATRIX") == "1"


def in_turn(rows: list, columns: list) -> list[tuple]:
    """``(row, column)`` pairs: every row once, the columns in turn, so each row and each column is checked (every
    pair with ``FULL_MATRIX=1``)."""
    if FULL_MATRIX:
        return list(itertools.product(rows, columns))
    if len(rows) < len(columns):
        raise ValueError(f"{len(rows)} rows cannot take {len(columns)} columns in turn")
    return [(row, columns[i % len(columns)]) for i, row in enumerate(rows)]
