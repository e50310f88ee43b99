"""Numbers and colours as sentences write them: percentages that keep a small value readable, no negative zero,
and the words for the two ends of a figure's colour scale (read from the figure, so the words follow its scale)."""

from __future__ import annotations

import colorsys
import math

import numpy as np
from plotly.colors import hex_to_rgb, unlabel_rgb

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


def _rgb(colour: str) -> tuple[float, float, float]:
    values = hex_to_rgb(colour) if colour.startswith("#") else unlabel_rgb(colour)
    return tuple(float(v) / 255 for v in values[:3])


def _luminance(rgb: tuple[float, float, float]) -> float:
    """WCAG 2 relative luminance of an sRGB colour (0 black … 1 white)."""
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


HUES = [(15, "red"), (45, "orange"), (70, "yellow"), (165, "green"), (195, "teal"), (255, "blue"), (330, "purple"),
        (360, "red")]  # upper bounds of hue, in degrees


def colour_words(colour: str) -> str:
    """A colour ("#fde725", "rgb(68,1,84)") in words a reader can match on screen: "light yellow", "dark purple"."""
    rgb = _rgb(colour)
    hue, _, saturation = colorsys.rgb_to_hls(*rgb)
    name = "grey" if saturation < 0.15 else next(n for bound, n in HUES if hue * 360 < bound)
    luminance = _luminance(rgb)
    shade = "light " if luminance > 0.4 else "dark " if luminance < 0.1 else ""
    return shade + name


def scale_ends(trace) -> tuple[str, str]:
    """The colours a heatmap trace gives its lowest and highest values, after ``reversescale``: ``(low, high)``."""
    scale = trace.colorscale if not isinstance(trace, dict) else trace["colorscale"]
    reverse = trace.reversescale if not isinstance(trace, dict) else trace.get("reversescale")
    low, high = scale[0][1], scale[-1][1]
    return (high, low) if reverse else (low, high)


def rank_colour_key(grid) -> str:
    """What a rank grid's colours mean (the logit lens's), read from its heatmap trace ``grid``, whose z is log10 of
    a rank counted from 1 (z = 0 is rank 1): the colour its scale gives the lowest rank drawn and the highest."""
    z = np.asarray(grid.z, dtype=float)
    low = float(np.nanmin(z)) if grid.zmin is None else float(grid.zmin)
    high = float(np.nanmax(z)) if grid.zmax is None else float(grid.zmax)
    if high <= low:
        return f"Every cell has the same colour: the final prediction is at rank {round(10 ** low):,} in each"
    first, last = scale_ends(grid)
    top = "rank 1, the final prediction already on top" if low == 0 else f"rank {round(10 ** low):,}"
    return (f"A {colour_words(first)} cell means {top}; the colours run to {colour_words(last)} at rank "
            f"{round(10 ** high):,}")
