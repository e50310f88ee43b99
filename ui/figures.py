"""Rendering a figure: toolbar download (PNG/SVG), CSV of its data, presentation styling."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from ui.session import image_format, presentation_mode
from viz.common import file_stem

PRESENTATION_FONT = 20


def plotly_config(name: str) -> dict:
    """Plotly config: the camera button saves ``name``.png (3× scale) or .svg, as chosen in the sidebar."""
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": image_format(), "filename": file_stem(name), "scale": 3},
        "modeBarButtonsToRemove": ["select2d", "lasso2d"],
    }


def csv_download(label: str, data: pd.DataFrame | Callable[[], pd.DataFrame], *, file_name: str, key: str | None) -> None:
    """A download button for ``data`` as CSV, built only when the user clicks it (never on a rerun).

    ``data``: a table, or a function returning one (so the table itself is not built either).
    """
    table = data if callable(data) else (lambda: data)
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
    width: str | int = "stretch",
) -> None:
    """Draw ``fig``; offer ``data`` (a table, or a function building it) as CSV under it, serialised only when
    clicked. ``name`` becomes the download file name. ``width``: ``"stretch"`` (the column's width) or
    ``"content"`` (the figure's own layout width)."""
    theme = "streamlit"
    if presentation_mode():
        fig = go.Figure(fig)  # never restyle a figure the caller may reuse
        fig.update_layout(
            template="plotly_white",
            font={"size": PRESENTATION_FONT},
            paper_bgcolor="white",
            plot_bgcolor="white",
        )
        theme = None
    st.plotly_chart(fig, theme=theme, config=plotly_config(name), key=key, width=width)
    if data is not None:
        csv_download("Download data (CSV)", data, file_name=f"{file_stem(name)}.csv", key=None if key is None else f"{key}-csv")
