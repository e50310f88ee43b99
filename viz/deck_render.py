"""Slide figures drawn as PNGs on the server with Plotly's ``kaleido`` and the Chromium the project installs.

One browser is started on first use and kept (starting one takes several seconds); every image is drawn in it, one at
a time (a lock: sessions take turns). MathJax is off and plotly.js is read from the installed ``plotly`` package, so
nothing is fetched: a drawing works offline. A drawing that fails or takes longer than ``IMAGE_SECONDS`` raises
``SlideRenderError``, a sentence for the page.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Sequence

import plotly.graph_objects as go

from core.errors import UserFacingError

CHROMIUM = os.environ.get("BROWSER_PATH", "/usr/bin/chromium")  # Debian's chromium (apt), never a download
START_SECONDS = 60
IMAGE_SECONDS = 60


class SlideRenderError(UserFacingError):
    """The slides' images could not be drawn; the message says why."""


class _Renderer:
    """A kaleido browser on an event loop of its own thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.kaleido = None

    def _start(self) -> None:
        import kaleido  # noqa: PLC0415 - a heavy import (a browser driver), only when slides are drawn

        if not os.path.exists(CHROMIUM):
            raise SlideRenderError(f"The slides cannot be drawn: there is no Chromium at {CHROMIUM} "
                                   "(install Debian's chromium package).")
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, name="slide-renderer", daemon=True).start()
        browser = kaleido.Kaleido(path=CHROMIUM, mathjax=False, timeout=IMAGE_SECONDS)
        try:
            asyncio.run_coroutine_threadsafe(browser.open(), loop).result(START_SECONDS)
        except Exception as err:
            loop.call_soon_threadsafe(loop.stop)
            raise SlideRenderError(f"The slides cannot be drawn: Chromium at {CHROMIUM} did not start ({err}).") from err
        self.loop, self.kaleido = loop, browser

    def png(self, fig: go.Figure, options: dict) -> bytes:
        with self.lock:
            if self.kaleido is None:
                self._start()
            work = asyncio.run_coroutine_threadsafe(self.kaleido.calc_fig(fig, opts=options), self.loop)
            try:
                return work.result(IMAGE_SECONDS + 5)
            except Exception as err:
                work.cancel()
                raise SlideRenderError(f"A slide's figure could not be drawn ({type(err).__name__}: {err}).") from err


RENDERER = _Renderer()


def render_pngs(figures: Sequence[go.Figure], options: dict,
                progress: Callable[[int, int], None] | None = None) -> list[bytes]:
    """Each of ``figures`` (already fitted) as a PNG of ``options`` (``format``, ``width``, ``height``, ``scale``),
    in order; ``progress(done, total)`` after each (a Stop between slides ends the run there)."""
    pngs = []
    for done, fig in enumerate(figures, start=1):
        pngs.append(RENDERER.png(fig, options))
        if progress is not None:
            progress(done, len(figures))
    return pngs


def can_render() -> bool:
    """Whether this server has the Chromium the images are drawn with (a page offers such a download only then)."""
    return os.path.exists(CHROMIUM)


def render_image(fig: go.Figure, options: dict) -> bytes:
    """``fig`` (already fitted) as an image of ``options`` (``format`` png or svg, ``width``, ``height``, ``scale``):
    a figure's download built only when asked (``ui.figures.figure_downloads``)."""
    return RENDERER.png(fig, options)


def png_size(png: bytes) -> tuple[int, int]:
    """``(width, height)`` in pixels from a PNG's header."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
