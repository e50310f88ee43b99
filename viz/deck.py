"""A deck of slides as data (title slide, an optional "about the model" slide, one slide per pinned figure) and the
figure of a slide as presentation mode lays it out: pure, no Streamlit. ``viz.deck_pptx`` writes it as PowerPoint,
``viz.deck_html`` as one self-contained HTML file, ``viz.deck_render`` draws its figures as 1920 × 1080 PNGs."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go

from viz.common import file_stem
from viz.fit.reading import copy_figure
from viz.fit.slide import fit_for_slide
from viz.fit.text import SLIDE_PIXELS, TAG, export_options

# The Streamlit themes' backgrounds and text colours, so a deck looks like the app in either.
THEMES = {"light": {"template": "plotly_white", "background": "#ffffff", "text": "#31333f", "muted": "#5c5f6b"},
          "dark": {"template": "plotly_dark", "background": "#0e1117", "text": "#fafafa", "muted": "#a3a8b8"}}
NOTES_ROWS = 20  # rows of a figure's table written into its speaker notes


@dataclass(frozen=True)
class Slide:
    """One pinned figure as a slide: its ``figure`` (the view's own, unfitted), ``title``, ``caption`` (the sentence
    written from its numbers), ``link`` (the view's URL, which reproduces it), ``model``, ``text`` and ``table`` (its
    data as CSV text, or "")."""

    figure: go.Figure
    title: str
    caption: str
    link: str
    model: str
    text: str
    table: str = ""
    name: str = "figure"  # the figure's file name (without extension)


@dataclass(frozen=True)
class Deck:
    """A deck: a title slide (``title``, ``author``, ``date``), the ``about`` lines of the model card (no slide when
    empty), and ``slides``; drawn in ``theme`` ("light" or "dark")."""

    title: str
    author: str = ""
    date: str = ""
    about: tuple[str, ...] = ()
    about_title: str = "About the model"
    slides: tuple[Slide, ...] = field(default_factory=tuple)
    theme: str = "light"

    @property
    def colours(self) -> dict[str, str]:
        return THEMES.get(self.theme, THEMES["light"])


def deck_file_stem(title: str) -> str:
    """A file name from the deck's title (safe on every OS), "deck" when the title has no usable letters."""
    stem = file_stem(title.strip())
    return "deck" if stem == "figure" else stem


def plain_text(text: str) -> str:
    """Plotly text as plain words: its ``<br>`` a space, other tags gone, spaces collapsed."""
    return " ".join(TAG.sub("", re.sub(r"<br\s*/?>", " ", str(text or ""), flags=re.I)).split())


def slide_figure(fig: go.Figure, width_px: float, theme: str = "light") -> go.Figure:
    """A copy of ``fig`` as presentation mode lays it out in a ``width_px`` column (``viz.fit.slide.fit_for_slide``,
    thinned for the 16:9 export), in ``theme``'s template and background."""
    colours = THEMES.get(theme, THEMES["light"])
    copy = fit_for_slide(fig, width_px, export_options(width_px)["height"])
    copy.update_layout(template=colours["template"], paper_bgcolor=colours["background"],
                       plot_bgcolor=colours["background"])
    return copy


THUMBNAIL_PX = 180


def thumbnail(fig: go.Figure) -> go.Figure:
    """A small copy of ``fig`` for the deck's list (no title, legend or margins), made once per figure (kept on it, as
    ``ui.figures.fitted`` keeps its copies: a pinned figure is shared, never modified)."""
    memo = fig.__dict__.setdefault("_fitted", {})
    if "thumbnail" not in memo:
        small = copy_figure(fig)
        small.update_layout(height=THUMBNAIL_PX, width=None, title=None, showlegend=False,
                            margin={"l": 4, "r": 4, "t": 4, "b": 4}, annotations=[])
        small.update_xaxes(showticklabels=False, title=None)
        small.update_yaxes(showticklabels=False, title=None)
        small.update_traces(showscale=False, selector=lambda trace: hasattr(trace, "showscale"))
        memo["thumbnail"] = small
    return memo["thumbnail"]


def image_options(width_px: float) -> dict:
    """Size of a slide's image: 16:9 at the CSS width nearest ``width_px``, scaled to exactly 1920 × 1080 pixels (the
    camera button's size in presentation mode)."""
    return {"format": "png"} | export_options(width_px)


def notes_of(slide: Slide) -> str:
    """A slide's speaker notes: the link that reproduces the view, the model and text, the sentence, and the first
    ``NOTES_ROWS`` rows of the figure's numbers."""
    lines = [f"View: {slide.link}", f"Model: {slide.model}"]
    if slide.text:
        lines.append(f"Text: {slide.text}")
    if slide.caption:
        lines.append(slide.caption)
    rows = slide.table.splitlines()
    if rows:
        shown = rows[:NOTES_ROWS + 1]
        more = len(rows) - len(shown)
        lines += ["Numbers (CSV):", *shown] + ([f"… and {more:,} more rows (the CSV in the figures' zip)"] if more else [])
    return "\n".join(lines)


SLIDE_SIZE = SLIDE_PIXELS  # (1920, 1080): every slide image


def figure_from_json(text: str) -> go.Figure:
    """The figure ``fig.to_json()`` wrote, with its arrays as NumPy arrays again (the JSON holds them as base64 typed
    arrays, ``{"dtype", "bdata", "shape"}``, which a figure would otherwise keep as dicts); raises ValueError for text
    that is not a figure."""
    def arrays(value):
        if isinstance(value, dict):
            if set(value) <= {"dtype", "bdata", "shape"} and {"dtype", "bdata"} <= set(value):
                flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
                shape = [int(n) for n in str(value.get("shape") or len(flat)).split(",")]
                return flat.reshape(shape).copy()
            return {key: arrays(item) for key, item in value.items()}
        if isinstance(value, list):
            return [arrays(item) for item in value]
        return value

    try:
        return go.Figure(arrays(json.loads(text)))
    except (TypeError, KeyError, AttributeError) as err:
        raise ValueError("not a stored figure") from err
