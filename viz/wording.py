"""Colours as sentences write them: the words for the two ends of a figure's colour scale (read from the figure, so the
words follow its scale). Numbers are written by ``core.maths.numbers``."""

from __future__ import annotations

import colorsys

import numpy as np
from plotly.colors import hex_to_rgb, unlabel_rgb


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
