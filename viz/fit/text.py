"""How wide a text is drawn and how it wraps, the slide's font size and its export size: the measures the
slide rules (``viz.fit.width``) fit figures with. Widths are CSS pixels."""

from __future__ import annotations

import html
import re

# ---------------------------------------------------------------------------------------------
# Slide rules: pure functions that fit a figure to the width it is drawn at (presentation mode)
# and size its camera-button export to a 16:9 slide. Widths are CSS pixels.

SLIDE_PIXELS = (1920, 1080)
EXPORT_SCALES = (1.0, 1.5, 2.0, 3.0)  # 1920 / scale CSS pixels wide, so the PNG is 1920 × 1080 exactly
LINE_HEIGHT = 1.3  # a text line's height, in font sizes
AXIS_TITLE_LINES = 2  # a y axis title longer than this many lines makes its figure taller
TICK_PITCH = 1.5  # least distance between neighbouring tick labels across their direction, in font sizes
TAG = re.compile(r"<[^>]+>")
LINE_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
SMALL_LINE = re.compile(r"^\s*<(sub|sup)>(.*)</\1>\s*$", re.IGNORECASE | re.DOTALL)
NARROW, WIDE = set("iljtfrI.,:;'!|[] "), set("mwMWOQGDHNU@%")
BRACKETS = set("()")  # wider than the narrow letters in the page's font: "the (60)" came out 2 px wider than estimated


BOLD_WIDER = 1.2  # bold text in the fallback sans-serif (DejaVu Sans Bold) measured 1.13-1.22 times this estimate
INVISIBLE = dict.fromkeys(map(ord, "\u2066\u2067\u2068\u2069"))  # bidirectional isolates draw nothing


def text_width(text: str, font_px: float) -> float:
    """Estimated drawn width of one line of Plotly text (tags dropped, entities as one character)."""
    plain = html.unescape(TAG.sub("", text)).translate(INVISIBLE)
    units = sum(0.32 if c in NARROW else 0.4 if c in BRACKETS else 0.9 if c in WIDE else 0.68 if c.isupper() else 0.58
                for c in plain)
    return units * font_px * (BOLD_WIDER if "<b>" in text.lower() else 1.0)


def wrap_text(text: str, max_px: float, font_px: float) -> str:
    """``text`` with ``<br>`` between words wherever a line would pass ``max_px``; existing lines kept.

    A ``<sub>``/``<sup>`` line is wrapped at its smaller size and keeps its tag on every piece.
    A single word longer than the line stays whole (it is never cut).
    """
    out = []
    for line in LINE_BREAK.split(str(text)):
        small = SMALL_LINE.match(line)
        tag, body = (small.group(1), small.group(2)) if small else (None, line)
        size = font_px * (0.75 if tag else 1.0)
        pieces, current = [], ""
        for word in body.split(" "):
            candidate = f"{current} {word}" if current else word
            if current and text_width(candidate, size) > max_px:
                pieces.append(current)
                current = word
            else:
                current = candidate
        pieces.append(current)
        out.extend(f"<{tag}>{p}</{tag}>" if tag else p for p in pieces)
    return "<br>".join(out)


def longest_line(text: str, font_px: float) -> float:
    return max(text_width(line, font_px) for line in LINE_BREAK.split(text))


def line_count(text: str | None) -> int:
    return len(LINE_BREAK.split(text)) if text else 0


def slide_font_size(width_px: float) -> int:
    """Base font for a figure drawn ``width_px`` wide: it grows with the figure, 12 to 20 px."""
    return int(min(20, max(12, round(width_px / 62))))


def export_options(width_px: float) -> dict:
    """``toImageButtonOptions`` size: 16:9 at the CSS width nearest ``width_px``, scaled to exactly 1920 × 1080."""
    scale = min(EXPORT_SCALES, key=lambda s: abs(SLIDE_PIXELS[0] / s - width_px))
    return {"width": round(SLIDE_PIXELS[0] / scale), "height": round(SLIDE_PIXELS[1] / scale), "scale": scale}


def page_export_options(width_px: float, height_px: float) -> dict:
    """``toImageButtonOptions`` size for a figure on the page: its own ``width_px`` × ``height_px`` (CSS pixels),
    scaled to exactly 1920 pixels wide, the height in proportion.

    Plotly sizes the PNG's canvas as CSS size × scale, cut to whole pixels: 1920 / width × width is 1919.999… for one
    width in eight (1919 pixels wide), so the scale aims a thousandth of a pixel over, which the cut takes off again.
    """
    width = max(1, round(width_px))
    return {"width": width, "height": round(height_px), "scale": (SLIDE_PIXELS[0] + 0.001) / width}
