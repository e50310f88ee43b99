"""Figures of one head's joint query-key map over a corpus, and of every head's map as small multiples."""

from __future__ import annotations

from collections import Counter

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.common import OKABE_ITO, SEQUENTIAL, plotly_safe

COLOUR_BY = ("kind", "position", "token")
COLOUR_NAMES = {"kind": "query or key", "position": "position in the text", "token": "token"}
QUERY_COLOUR, KEY_COLOUR = OKABE_ITO[0], OKABE_ITO[5]
QUERY_SYMBOL, KEY_SYMBOL = "circle", "diamond"
OTHER_COLOUR = "#bbbbbb"
TOP_TOKENS = 7
CONTEXT_TOKENS = 6


def token_in_context(tokens: tuple[str, ...], starts: np.ndarray, text_index: np.ndarray, i: int,
                     context: int = CONTEXT_TOKENS) -> str:
    """Token ``i`` in bold between up to ``context`` tokens of its own text each side, escaped for Plotly."""
    first, end = int(starts[text_index[i]]), int(starts[text_index[i] + 1])
    before = [plotly_safe(t) for t in tokens[max(first, i - context):i]]
    after = [plotly_safe(t) for t in tokens[i + 1:min(end, i + 1 + context)]]
    return ("… " if i - context > first else "") + " ".join([*before, f"<b>{plotly_safe(tokens[i])}</b>", *after]) \
        + (" …" if i + 1 + context < end else "")


def _kind_traces(xy_q, xy_k, hover_q, hover_k, marker_q: dict, marker_k: dict, names=("queries", "keys")) -> list[go.Scatter]:
    return [
        go.Scatter(x=xy[:, 0], y=xy[:, 1], mode="markers", name=name,
                   marker={"size": 5, "opacity": 0.7, "symbol": symbol} | marker,
                   customdata=hover, hovertemplate="%{customdata[1]}<br>%{customdata[2]}<extra></extra>")
        for xy, hover, marker, symbol, name in ((xy_q, hover_q, marker_q, QUERY_SYMBOL, names[0]),
                                                  (xy_k, hover_k, marker_k, KEY_SYMBOL, names[1]))
    ]


def query_key_figure(coords: np.ndarray, tokens: tuple[str, ...], contexts: list[str], position: np.ndarray, *,
                     colour_by: str, title: str, axis: str, lines: tuple[int, np.ndarray, np.ndarray] | None = None) -> go.Figure:
    """Scatter of a joint map: ``coords`` ``[2N, 2]`` (N queries, then N keys), circles for queries, diamonds for keys.

    ``contexts``: ``N`` escaped hover texts (the token in its context). ``colour_by`` in ``COLOUR_BY``. ``lines``:
    ``(query, keys [K], weights [K])``: lines from that query to its top keys, their width by weight. Each point's
    ``customdata`` is ``[corpus index, kind, context]``, so a click names the query.
    """
    n = len(tokens)
    if coords.shape != (2 * n, 2) or len(contexts) != n or len(position) != n:
        raise ValueError(f"{coords.shape} coordinates for {n} tokens, {len(contexts)} contexts, {len(position)} positions")
    xy_q, xy_k = coords[:n], coords[n:]
    hover_q = [[i, f"query {i}: position {position[i]}", contexts[i]] for i in range(n)]
    hover_k = [[i, f"key {i}: position {position[i]}", contexts[i]] for i in range(n)]
    fig = go.Figure()
    if colour_by == "kind":
        traces = _kind_traces(xy_q, xy_k, hover_q, hover_k, {"color": QUERY_COLOUR}, {"color": KEY_COLOUR})
    elif colour_by == "position":
        scale = {"colorscale": SEQUENTIAL, "cmin": 0, "cmax": max(1, int(position.max()))}
        traces = _kind_traces(xy_q, xy_k, hover_q, hover_k,
                              {"color": position, **scale, "colorbar": {"title": {"text": "position"}, "len": 0.6}},
                              {"color": position, **scale})
    elif colour_by == "token":
        common = [t for t, _ in Counter(tokens).most_common(TOP_TOKENS)]
        traces = []
        for k, token in enumerate([*common, None]):
            rows = [i for i, t in enumerate(tokens) if (t == token if token is not None else t not in common)]
            if not rows:
                continue
            colour = OKABE_ITO[k % len(OKABE_ITO)] if token is not None else OTHER_COLOUR
            name = f"“{plotly_safe(token)}”" if token is not None else "other tokens"
            traces += _kind_traces(xy_q[rows], xy_k[rows], [hover_q[i] for i in rows], [hover_k[i] for i in rows],
                                   {"color": colour}, {"color": colour}, (f"{name}: queries", f"{name}: keys"))
    else:
        raise ValueError(f"unknown colouring {colour_by!r}; choose one of {COLOUR_BY}")
    for trace in traces:
        fig.add_trace(trace)
    if lines is not None:
        query, keys, weights = lines
        top = float(weights.max()) if len(weights) else 1.0
        for key, weight in zip(keys, weights, strict=True):
            fig.add_trace(go.Scatter(
                x=[xy_q[query, 0], xy_k[key, 0]], y=[xy_q[query, 1], xy_k[key, 1]], mode="lines", showlegend=False,
                line={"color": "black", "width": 1 + 5 * float(weight) / top}, hoverinfo="skip"))
        fig.add_trace(go.Scatter(
            x=xy_k[keys, 0], y=xy_k[keys, 1], mode="markers", name="keys it attends to most",
            marker={"size": 11, "symbol": KEY_SYMBOL, "color": KEY_COLOUR, "line": {"width": 2, "color": "black"}},
            customdata=[[int(k), f"key {k}: weight {w:.3f}", contexts[k]] for k, w in zip(keys, weights, strict=True)],
            hovertemplate="%{customdata[1]}<br>%{customdata[2]}<extra></extra>"))
        fig.add_trace(go.Scatter(
            x=[xy_q[query, 0]], y=[xy_q[query, 1]], mode="markers", name="chosen query",
            marker={"size": 14, "symbol": QUERY_SYMBOL, "color": QUERY_COLOUR, "line": {"width": 2, "color": "black"}},
            customdata=[hover_q[query]], hovertemplate="%{customdata[1]}<br>%{customdata[2]}<extra></extra>"))
    fig.update_layout(
        title=title,
        xaxis={"title": f"{axis} 1", "showticklabels": False, "zeroline": False},
        yaxis={"title": f"{axis} 2", "showticklabels": False, "zeroline": False},
        legend={"title": {"text": COLOUR_NAMES[colour_by]}},
        height=560,
        margin={"l": 40, "r": 20, "t": 60, "b": 40},
        clickmode="event+select",
    )
    return fig


def matrix_figure(maps: list[tuple[int, int, np.ndarray, np.ndarray]], columns: int, *, title: str) -> go.Figure:
    """Small multiples: one panel per ``(layer, head, query_xy [n, 2], key_xy [n, 2])``, ``columns`` to a row, each
    titled ``layer.head``. Every point's ``customdata`` is ``[layer, head]``, so a click names the head."""
    rows = -(-len(maps) // columns)
    fig = make_subplots(rows=rows, cols=columns, subplot_titles=[f"{layer}.{head}" for layer, head, _, _ in maps],
                        horizontal_spacing=0.012, vertical_spacing=0.3 / max(rows, 1))
    for k, (layer, head, xy_q, xy_k) in enumerate(maps):
        row, col = k // columns + 1, k % columns + 1
        for xy, colour, symbol, name in ((xy_q, QUERY_COLOUR, QUERY_SYMBOL, "queries"), (xy_k, KEY_COLOUR, KEY_SYMBOL, "keys")):
            fig.add_trace(go.Scatter(
                x=xy[:, 0], y=xy[:, 1], mode="markers", name=name, legendgroup=name, showlegend=k == 0,
                marker={"size": 3, "opacity": 0.6, "color": colour, "symbol": symbol},
                customdata=[[layer, head]] * len(xy), hovertemplate=f"layer {layer}, head {head}: click to open<extra></extra>",
            ), row=row, col=col)
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False)
    fig.update_annotations(font={"size": 11})
    fig.update_layout(title=title, height=max(260, 110 * rows + 120), margin={"l": 20, "r": 20, "t": 80, "b": 30},
                      legend={"orientation": "h"}, clickmode="event+select")
    return fig
