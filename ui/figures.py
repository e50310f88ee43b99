"""Rendering a figure: toolbar download (PNG/SVG), CSV of its data, presentation styling."""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from ui.explain import PAGE_PADDING_PX
from ui.session import image_format, presentation_mode
from viz.common import export_options, file_stem, fit_for_page, fit_for_slide

# The width a full-page figure is drawn at on the smallest screen we fit (a 1280 × 720 projector):
# presentation mode collapses the sidebar; otherwise the open sidebar and Streamlit's padding take their share.
PRESENTATION_WIDTH = 1280 - 2 * PAGE_PADDING_PX
NORMAL_WIDTH = 820
COLUMN_GAP_PX = 8  # a figure in a column loses its share of the gap between columns


def plotly_config(name: str, width_px: float = NORMAL_WIDTH) -> dict:
    """Plotly config: the camera button saves ``name``.png or .svg (as chosen in the sidebar) at 1920 × 1080.

    The export is 16:9 at the CSS size nearest the figure's own width, scaled up to 1920 × 1080
    pixels, so its fonts keep their size relative to the figure. No Plotly logo and no box or lasso select
    buttons: Streamlit's frontend removes them from every chart without selections, so they are not sent.
    """
    return {"toImageButtonOptions": {"format": image_format(), "filename": file_stem(name)} | export_options(width_px)}


def fitted(fig: go.Figure, width_px: float, *, slide: bool, reserve: bool = False) -> go.Figure:
    """``fig`` restyled for a ``width_px`` column on the page or on a slide: a copy, never the caller's figure.
    ``reserve``: on the page, set its margins up front (``viz.common.fit_for_page``).

    The copy is kept on ``fig`` (a private attribute; plotly allows those), so a figure from a cache is fitted
    once per width and mode, not on every rerun (fitting costs 25-50 ms of CPU per figure).
    """
    memo = fig.__dict__.setdefault("_fitted", {})
    key = (round(width_px), slide, reserve)
    if key not in memo:
        if slide:
            copy = fit_for_slide(fig, width_px, export_options(width_px)["height"])
            copy.update_layout(template="plotly_white", paper_bgcolor="white", plot_bgcolor="white")
        else:
            copy = fit_for_page(fig, width_px, reserve=reserve)
        memo[key] = copy
    return memo[key]


_ID_SECRET = secrets.token_hex(16)  # per server process: a stable download id cannot be guessed by another session
_install_lock = threading.Lock()
# Streamlit 1.67's bookkeeping of deferred downloads that the stable id replaces the random one in.
_MANAGER_STATE = ("_lock", "_deferred_callables", "_deferred_ids_by_session", "_files_by_session_and_coord")


def stable_download_id(session_id: str, element_id: str, coordinates: str) -> str:
    """The deferred-download id of one button in one session: the same on every run, unguessable without the
    session's id and this process's secret (Streamlit serves a deferred file to whoever names its id)."""
    return hashlib.sha256(f"{_ID_SECRET}|{session_id}|{element_id}|{coordinates}".encode()).hexdigest()[:32]


def keep_download_ids_stable() -> None:
    """Give each deferred download button (``st.download_button`` with a callable) the same file id on every run.

    Streamlit 1.67 registers the callable under a new random id on every run, so the button's message differs
    each time and is sent in full (about 0.2 kB on every click on /attention) instead of as a 77-byte reference
    to the copy the browser already holds. Here the id is re-keyed to ``stable_download_id``: each run still
    registers its own callable under it, replacing the last run's, so a click always downloads the data of the
    figure on screen. Installed once per server, on Streamlit's media file manager.
    """
    from streamlit import runtime

    if not runtime.exists():
        return
    manager = runtime.get_instance().media_file_mgr
    with _install_lock:
        if getattr(manager.add_deferred, "_stable_ids", False):
            return
        if not all(hasattr(manager, name) for name in _MANAGER_STATE):  # another Streamlit: keep its random ids
            return
        register = manager.add_deferred

        def add_deferred(data_callable, mimetype, coordinates, file_name=None, *, element_id=""):
            fresh = register(data_callable, mimetype, coordinates, file_name=file_name, element_id=element_id)
            with manager._lock:
                entry = manager._deferred_callables.pop(fresh, None)
                if entry is None:  # not registered as Streamlit 1.67 does: keep its own id
                    return fresh
                session = entry["session_id"]
                stable = stable_download_id(session, element_id, coordinates)
                manager._deferred_callables[stable] = entry
                ids = manager._deferred_ids_by_session[session]
                ids.discard(fresh)
                ids.add(stable)
                manager._files_by_session_and_coord[session][coordinates] = stable
                return stable

        add_deferred._stable_ids = True
        manager.add_deferred = add_deferred


def csv_download(label: str, data: pd.DataFrame | Callable[[], pd.DataFrame], *, file_name: str, key: str | None) -> None:
    """A download button for ``data`` as CSV, built only when the user clicks it (never on a rerun).

    ``data``: a table, or a function returning one (so the table itself is not built either).
    """
    table = data if callable(data) else (lambda: data)
    keep_download_ids_stable()
    st.download_button(
        label,
        lambda: table().to_csv(index=False).encode("utf-8"),
        file_name=file_name,
        mime="text/csv",
        on_click="ignore",
        key=key,
        icon=":material/download:",
    )


def show_figure(
    fig: go.Figure, *, name: str, data: pd.DataFrame | Callable[[], pd.DataFrame] | None = None, key: str | None = None,
    width: str | int = "stretch", share: float = 1.0, reserve_margins: bool = False,
) -> None:
    """Draw ``fig``; offer ``data`` (a table, or a function building it) as CSV under it, serialised only when
    clicked. ``name`` becomes the download file name. ``width``: ``"stretch"`` (the column's width) or
    ``"content"`` (the figure's own layout width). ``share``: the fraction of the page's width the figure's
    column takes (0.5 in one of two columns); presentation mode fits fonts, titles and tick labels to that width.
    ``reserve_margins``: a figure redrawn on every click, whose ``share`` is exact, gets the margins its labels take
    up front, so the browser draws it once (``viz.common.reserve_margins``).
    """
    slide = presentation_mode()
    width_px = (PRESENTATION_WIDTH if slide else NORMAL_WIDTH) * share - (COLUMN_GAP_PX if share < 1 else 0)
    theme = None if slide else "streamlit"
    fig = fitted(fig, width_px, slide=slide, reserve=reserve_margins)
    st.plotly_chart(fig, theme=theme, config=plotly_config(name, width_px), key=key, width=width)
    if data is not None:
        csv_download("Download data (CSV)", data, file_name=f"{file_stem(name)}.csv", key=None if key is None else f"{key}-csv")
