"""Numbers as sentences write them: percentages that keep a small value readable, probabilities down to one in a
million, no negative zero. Plain text, no Streamlit and no figure: ``core`` writes its sentences with these too."""

from __future__ import annotations

import math

SMALLEST = 1e-6  # a probability below this is written "less than 0.0001%"


def percent(x: float, digits: int = 0) -> str:
    """A fraction ``x`` as a percentage with ``digits`` decimals, never "-0%"; a positive value that would round to
    0 keeps two significant digits (0.0004 → "0.040%")."""
    x = float(x)
    if 0 < x < 0.5 * 10 ** -(digits + 2):
        return probability(x)
    return f"{x:z.{digits}%}"


def probability(p: float) -> str:
    """A probability as a percentage: one decimal from 0.1% up, two significant digits below (0.000045 →
    "0.0045%"), "less than 0.0001%" below ``SMALLEST``."""
    p = float(p)
    if p >= 0.001 or p <= 0:
        return f"{p:z.1%}"
    if p < SMALLEST:
        return f"less than {SMALLEST:.4%}"
    return f"{p:.{1 - math.floor(math.log10(p * 100))}%}"


def percent_span(values) -> str:
    """The lowest and highest of ``values`` (fractions) as whole percentages, "71%–92%", or one when they print
    alike."""
    low, high = percent(min(values), 0), percent(max(values), 0)
    return low if low == high else f"{low}–{high}"


def fixed(x: float, digits: int = 2) -> str:
    """``x`` with ``digits`` decimals, never "-0.00" (a value that rounds to zero is written 0.00)."""
    return f"{float(x):z.{digits}f}"
