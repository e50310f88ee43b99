"""Small pieces every figure shares: safe text, token axes, palettes, file names."""

from __future__ import annotations

import html
import re

# Colour-blind-safe sequential scales (perceptually uniform, readable in greyscale).
SEQUENTIAL = "Viridis"
COLORBLIND_SAFE = "Cividis"
# Okabe–Ito qualitative palette: distinguishable with every common colour-vision deficiency.
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]


def plotly_safe(text: object) -> str:
    """Escape text for Plotly, whose labels and hovers understand a subset of HTML.

    ``<``, ``>`` and ``&`` become entities (Plotly shows them as the characters),
    so a token such as ``<img src=x onerror=...>`` is shown, never interpreted. Control
    characters (a byte-level token can decode to one) become ASCII escapes (``\\n``, ``\\x14``,
    as ``core.model.tokens.readable_token`` writes them): XML forbids them, one in a label would break the figure's
    SVG and PNG export, and the control pictures (U+2400…) are missing from the bundled fonts. Right-to-left
    words are isolated (see ``isolate_rtl``) so that ``##`` or `` (2)`` around them stay where they are written.
    """
    return isolate_rtl(html.escape(str(text), quote=False).translate(CONTROL_ESCAPES))


CONTROL_ESCAPES = {c: f"\\x{c:02x}" for c in range(0x20)} | {0x0A: "\\n", 0x09: "\\t", 0x0D: "\\r", 0x7F: "\\x7f"}

# A run of right-to-left letters (Hebrew, Arabic, Syriac, Thaana, N'Ko, their presentation forms), with the
# marks and spaces between them.
RTL_RUN = re.compile(
    r"[\u0590-\u08FF\uFB1D-\uFDFF\uFE70-\uFEFF]+(?:[\s\u064B-\u065F\u0670]*[\u0590-\u08FF\uFB1D-\uFDFF\uFE70-\uFEFF]+)*"
)
FIRST_STRONG_ISOLATE, POP_DIRECTIONAL_ISOLATE = "\u2068", "\u2069"


def isolate_rtl(text: str) -> str:
    """Each right-to-left run wrapped in Unicode isolates (FSI … PDI, invisible).

    Without them the bidirectional algorithm carries the neutral and number characters beside an Arabic token
    into its right-to-left run: ``##ل`` is drawn "ل##" and the repeated label ``ل·2`` is drawn "2·ل". Isolated,
    the run is read right to left inside itself and labels keep the app's left-to-right order.
    """
    return RTL_RUN.sub(lambda m: FIRST_STRONG_ISOLATE + m.group(0) + POP_DIRECTIONAL_ISOLATE, text)


MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&])")


def markdown_safe(text: object) -> str:
    """Text to put inside Streamlit markdown (titles, captions) as it is: every character markdown,
    math or HTML could interpret gets a backslash, so a token like ``![x](http://…)`` stays text."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", str(text))


def token_axis(labels: list[str], *, max_labels: int = 256) -> dict:
    """Axis settings for tokens placed at 0..T-1 with their labels as tick text.

    Figures put tokens at integer positions because a categorical axis would
    merge repeated tokens ("the" twice) into one. Past ``max_labels`` only every
    k-th label is written, so long inputs stay legible.
    """
    step = max(1, -(-len(labels) // max_labels))
    positions = list(range(0, len(labels), step))
    return {
        "tickmode": "array",
        "tickvals": positions,
        "ticktext": [plotly_safe(labels[i]) for i in positions],
        "range": [-0.5, len(labels) - 0.5],
        "showgrid": False,
        "zeroline": False,
    }


def file_stem(*parts: object) -> str:
    """A file name from parts such as (model, "layer", 3): safe on every OS."""
    joined = "-".join(str(p) for p in parts if p is not None and str(p) != "")
    return re.sub(r"[^A-Za-z0-9._-]+", "_", joined).strip("._-")[:120] or "figure"
