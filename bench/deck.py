"""Slides in one click (issue 53): a 10-slide deck of default views on SmolLM2, timed once the views are cached.

The views are opened through AppTest (their figures computed and cached as a visit computes them), the first figures
of each page pinned with "Pin to deck" until ten are pinned; then the deck is made as the Deck page makes it:
PowerPoint (every slide drawn 1920 × 1080 by kaleido in Chromium, then python-pptx) and HTML (plotly.js inlined).
The first PowerPoint pays for starting Chromium (kept after); both are timed. Run with ``python -m bench deck``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from ui import deck
from viz.deck import Deck, image_options, slide_figure
from viz.deck_html import html_deck
from viz.deck_pptx import figures_zip, pptx_bytes
from viz.deck_render import render_pngs

APP = str(Path(__file__).resolve().parents[1] / "app.py")
MODEL = "SmolLM2-135M-Instruct"
PAGES = ["app_pages/home.py", "app_pages/attention.py", "app_pages/maxima.py", "app_pages/stats.py",
         "app_pages/inside.py", "app_pages/predictions.py"]
SLIDES = 10
WIDTH = 1232  # ui.figures.PRESENTATION_WIDTH


def _pins() -> list:
    at = AppTest.from_file(APP, default_timeout=900)
    at.query_params["model"] = MODEL
    at.run()
    for page in PAGES:
        at.switch_page(page).run()
        for index in range(len([b for b in at.button if b.label == "Pin to deck"])):
            if len(at.session_state["deck.pins"] if "deck.pins" in at.session_state else []) >= SLIDES:
                break
            [b for b in at.button if b.label == "Pin to deck"][index].click().run()
    return list(at.session_state["deck.pins"])


def main() -> dict:
    pins = _pins()
    slides, missing = deck.slides_of(pins)
    assert not missing and len(slides) == SLIDES, (len(slides), len(missing))
    made = Deck("SmolLM2 at work", "bench", "today", (), "About", tuple(slides))
    out: dict = {"slides": len(slides), "load average": os.getloadavg()}
    for attempt in ("first (starts Chromium)", "second"):
        started = time.perf_counter()
        figures = [slide_figure(s.figure, WIDTH) for s in slides]
        pngs = render_pngs(figures, image_options(WIDTH))
        pptx = pptx_bytes(made, pngs)
        out[f"PowerPoint, {attempt}: s"] = round(time.perf_counter() - started, 1)
    out["PowerPoint MB"] = round(len(pptx) / 1e6, 2)
    out["figures zip MB"] = round(len(figures_zip(made, pngs)) / 1e6, 2)
    started = time.perf_counter()
    page = html_deck(made, [slide_figure(s.figure, WIDTH) for s in slides]).encode("utf-8")
    out["HTML: s"] = round(time.perf_counter() - started, 2)
    out["HTML MB"] = round(len(page) / 1e6, 2)
    out["load average after"] = os.getloadavg()
    return out


if __name__ == "__main__":
    print(main())
