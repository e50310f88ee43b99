"""Figures of per-head statistics: layers × heads heatmaps (one, or two side by side on one colour scale)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.model.layers import BLOCK_AXIS
from viz.common import SEQUENTIAL, plotly_safe

LAYER_TITLE = BLOCK_AXIS


def _heatmap(grid: np.ndarray, colorbar: str) -> go.Heatmap:
    layers, heads = grid.shape
    return go.Heatmap(
        z=grid,
        x=list(range(heads)),
        y=list(range(layers)),
        coloraxis="coloraxis",
        hovertemplate="layer %{y}, head %{x}<br>" + plotly_safe(colorbar) + ": %{z:.3f}<extra></extra>",
        xgap=1,
        ygap=1,
    )


def _color_range(grids: list[np.ndarray], share: bool) -> tuple[float, float]:
    finite = np.concatenate([g[np.isfinite(g)] for g in grids])
    top = float(finite.max()) if finite.size else 1.0
    low = 0.0 if share or not finite.size else min(0.0, float(finite.min()))
    return low, max(top, low + 1e-9)


def head_heatmap(grid: np.ndarray, *, title: str, colorbar: str, share: bool = False) -> go.Figure:
    """Heatmap of ``grid`` ``[layers, heads]``: layers as rows (0 at the bottom), heads as columns.

    ``share``: the values are fractions, so the colour scale starts at 0.
    """
    return head_heatmaps([grid], titles=[title], colorbar=colorbar, share=share)


def head_heatmaps(grids: list[np.ndarray], *, titles: list[str], colorbar: str, share: bool = False) -> go.Figure:
    """Several ``[layers, heads]`` grids side by side on one colour scale, so their colours compare directly."""
    if not grids or len(grids) != len(titles):
        raise ValueError(f"{len(grids)} grids for {len(titles)} titles")
    if any(g.ndim != 2 or g.shape != grids[0].shape for g in grids):
        raise ValueError(f"every grid must be [layers, heads] of the same shape, got {[g.shape for g in grids]}")
    layers, heads = grids[0].shape
    fig = make_subplots(rows=1, cols=len(grids), subplot_titles=[plotly_safe(t) for t in titles], horizontal_spacing=0.06)
    for col, grid in enumerate(grids, start=1):
        fig.add_trace(_heatmap(grid, colorbar), row=1, col=col)
        fig.update_xaxes(title_text="head", dtick=1, row=1, col=col)
        fig.update_yaxes(title_text=LAYER_TITLE if col == 1 else None, dtick=1, row=1, col=col)
    low, high = _color_range(grids, share)
    fig.update_layout(
        coloraxis={"colorscale": SEQUENTIAL, "cmin": low, "cmax": high, "colorbar": {"title": {"text": plotly_safe(colorbar)}}},
        height=220 + 28 * layers,
        margin={"l": 60, "r": 20, "t": 60, "b": 50},
    )
    return fig
