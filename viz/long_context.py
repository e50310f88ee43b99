"""Figures, tables and sentences of the long-context page (``core.attention_heads.long_context``): attention by distance per head, the
share on the sink by query position, and what the numbers say about each head, each written from the numbers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from core.attention_heads.long_context import FAR_SHARE, LOCAL_DISTANCE, LOCAL_SHARE, SINK_SHARE, LongContextProfile, bin_labels, head_kinds
from core.maths.numbers import percent, percent_span
from viz.common import SEQUENTIAL, plotly_safe

MAX_POINTS = 256  # points per line of the sink figure: query positions are averaged in blocks past this
UNIFORM_ROW = "uniform"


def _distance_word(profile: LongContextProfile) -> str:
    return "query − key" if profile.causal else "|query − key|"


def window_position(edges: np.ndarray, window: int) -> float | None:
    """Where distance ``window`` falls on the bin axis (bin ``b`` drawn at ``b``, its edges at ``b ± 0.5``): the
    boundary between the last distance a query sees (``window − 1``) and the first it does not."""
    if window > edges[-1] - 1:
        return None
    b = int(np.searchsorted(edges, window, side="right")) - 1
    return b - 0.5 + (window - edges[b]) / (edges[b + 1] - edges[b])


def distance_heatmap(profile: LongContextProfile, layer: int) -> go.Figure:
    """One layer's heads (rows, and uniform attention as the top row) × distance bins (columns): the mean share of a
    query's attention at those distances; the layer's sliding window as a dashed line."""
    labels = bin_labels(profile.edges)
    heads = profile.shares.shape[1]
    z = np.vstack([profile.shares[layer], profile.uniform[layer][None]])
    rows = [f"head {h}" for h in range(heads)] + [UNIFORM_ROW]
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(len(labels))), y=rows, customdata=np.tile(np.array(labels, dtype=object), (len(rows), 1)),
        colorscale=SEQUENTIAL, zmin=0, zmax=max(float(z.max()), 1e-9), xgap=1, ygap=1,
        colorbar={"title": {"text": "share of attention"}},
        hovertemplate="%{y}, distance %{customdata}: %{z:.3f}<extra></extra>",
    ))
    window = profile.windows[layer]
    if window is not None and (x := window_position(profile.edges, window)) is not None:
        fig.add_vline(x=x, line={"dash": "dash", "color": "#d62728", "width": 2})
        fig.add_annotation(x=x, y=1, yref="paper", yanchor="bottom", showarrow=False, xanchor="left",
                           text=f"sliding window: {window:,} tokens", font={"color": "#d62728"})
    fig.update_xaxes(title_text=f"distance ({_distance_word(profile)}, tokens)", tickvals=list(range(len(labels))),
                     ticktext=labels)
    fig.update_yaxes(title_text=None, autorange="reversed")
    fig.update_layout(title={"text": plotly_safe(f"Layer {layer}: attention by distance, {profile.num_tokens:,} tokens")},
                      height=200 + 26 * len(rows), margin={"l": 80, "r": 20, "t": 70, "b": 60})
    return fig


def _blocks(positions: np.ndarray) -> int:
    return max(1, math.ceil(len(positions) / MAX_POINTS))


def _pooled(values: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``values`` ``[..., T]`` at ``positions`` averaged in consecutive blocks (``_blocks``); the blocks' first
    positions."""
    size = _blocks(positions)
    starts = np.arange(0, len(positions), size)
    picked = values[..., positions]
    return np.stack([picked[..., s:s + size].mean(axis=-1) for s in starts], axis=-1), positions[starts]


def sink_heatmap(profile: LongContextProfile, layer: int, sink_token: str) -> go.Figure:
    """Each head of ``layer`` (rows, and uniform attention as the last row) × query position (columns, averaged in
    blocks when there are more than ``MAX_POINTS``): the share of the query's attention on the sink."""
    queries = profile.queries
    shares, x = _pooled(profile.sink[layer], queries)
    even, _ = _pooled(profile.sink_uniform[layer], queries)
    size = _blocks(queries)
    heads = shares.shape[0]
    rows = [f"head {h}" for h in range(heads)] + [UNIFORM_ROW]
    ends = np.minimum(x + size - 1, queries[-1])
    span = np.array([[f"{a:,}" if a == b else f"{a:,}–{b:,}" for a, b in zip(x, ends, strict=True)]] * len(rows),
                    dtype=object)
    fig = go.Figure(go.Heatmap(
        z=np.vstack([shares, even[None]]), x=x + (size - 1) / 2, y=rows, customdata=span, colorscale=SEQUENTIAL,
        zmin=0, zmax=1, ygap=1, colorbar={"title": {"text": "share on the sink"}},
        hovertemplate="%{y}, query %{customdata}: %{z:.3f}<extra></extra>",
    ))
    pooled = f" (mean of {size} positions per cell)" if size > 1 else ""
    fig.update_xaxes(title_text=f"query position{pooled}")
    fig.update_yaxes(title_text=None, autorange="reversed")
    fig.update_layout(title={"text": plotly_safe(f"Layer {layer}: attention on {sink_token} (position 0) by query position")},
                      height=200 + 26 * len(rows), margin={"l": 80, "r": 20, "t": 70, "b": 60})
    return fig


def distance_table(profile: LongContextProfile) -> pd.DataFrame:
    """One row per (layer, head, distance bin): the share, and uniform attention's share in that layer."""
    layers, heads, bins = profile.shares.shape
    labels = bin_labels(profile.edges)
    return pd.DataFrame({
        "layer": np.repeat(np.arange(layers), heads * bins), "head": np.tile(np.repeat(np.arange(heads), bins), layers),
        "distance": labels * (layers * heads), "share": profile.shares.reshape(-1),
        "uniform share": np.repeat(profile.uniform, heads, axis=0).reshape(-1),
    })


def head_table(profile: LongContextProfile) -> pd.DataFrame:
    """One row per head: its local, far and sink shares, uniform attention's, and its kind (``head_kinds``)."""
    layers, heads = profile.far.shape
    return pd.DataFrame({
        "layer": np.repeat(np.arange(layers), heads), "head": np.tile(np.arange(heads), layers),
        "kind": head_kinds(profile).reshape(-1),
        f"share within {LOCAL_DISTANCE} tokens": profile.local.reshape(-1),
        f"uniform within {LOCAL_DISTANCE}": np.repeat(profile.local_uniform, heads),
        f"share at ≥ {profile.far_distance} tokens, sink excluded": profile.far.reshape(-1),
        f"uniform at ≥ {profile.far_distance}": np.repeat(profile.far_uniform, heads),
        "share on the sink": profile.sink_mean.reshape(-1),
        "uniform on the sink": np.repeat(profile.sink_uniform_mean, heads),
    })


def sink_table(profile: LongContextProfile, layer: int) -> pd.DataFrame:
    """One row per query position of ``layer``: each head's share on the sink, and uniform attention's."""
    queries = profile.queries
    table = pd.DataFrame({"query position": queries})
    for head in range(profile.sink.shape[1]):
        table[f"head {head}"] = profile.sink[layer, head, queries]
    table["uniform"] = profile.sink_uniform[layer, queries]
    return table


def _code(layer: int, head: int) -> str:
    return f"layer {layer} head {head}"


def kinds_sentence(profile: LongContextProfile) -> str:
    """How many heads of each kind, with the thresholds and uniform attention's shares beside them."""
    kinds = head_kinds(profile)
    total = kinds.size
    count = {k: int((kinds == k).sum()) for k in ("local", "sink", "long-range", "between")}
    far = profile.far_distance
    groups = window_groups(profile)
    if len(groups) > 1:  # a layer with a window and one without put very different shares far away
        uniform_far = " and ".join(f"{percent_span(profile.far_uniform[layers])}{' there' if i == 0 else ''} in "
                                   f"{_group_name(profile, window, layers)}" for i, (window, layers) in enumerate(groups))
    else:
        uniform_far = f"{percent_span(profile.far_uniform)} there"
    said = (f"Of the {total} heads, {count['local']} are local (at least {percent(LOCAL_SHARE)} of their attention "
            f"within {LOCAL_DISTANCE} tokens; uniform attention would put {percent_span(profile.local_uniform)} there), "
            f"{count['sink']} put at least {percent(SINK_SHARE)} on the sink, {count['long-range']} send at least "
            f"{percent(FAR_SHARE)} to tokens {far:,} or more away other than the sink, and no less than uniform "
            f"attention would (it puts {uniform_far}), and {count['between']} do none of "
            "these.")
    if profile.num_tokens - 1 < far:
        said += f" This text has {profile.num_tokens:,} tokens, so no key is {far:,} tokens from any query."
    return said


def layer_sentence(profile: LongContextProfile, layer: int) -> str:
    """The most local and the farthest-reaching head of ``layer``, by the numbers of the figure."""
    local, far = profile.local[layer], profile.far[layer]
    near = int(np.argmax(local))
    said = (f"In layer {layer}, head {near} is the most local: {percent(local[near])} of its attention within "
            f"{LOCAL_DISTANCE} tokens (uniform attention: {percent(profile.local_uniform[layer])}).")
    reach = int(np.argmax(far))
    if far[reach] > 0:
        said += (f" Head {reach} reaches farthest: {percent(far[reach])} at {profile.far_distance:,} tokens or more, "
                 f"the sink excluded (uniform attention: {percent(profile.far_uniform[layer])}).")
    else:
        said += f" No head of this layer puts any attention {profile.far_distance:,} tokens or more away, the sink excluded."
    return said


def _runs(layers: list[int]) -> str:
    """[0, 1, 2, 4, 6, 7] → "0–2, 4, 6–7"."""
    parts, start = [], None
    for i, layer in enumerate(layers):
        if start is None:
            start = layer
        if i + 1 == len(layers) or layers[i + 1] != layer + 1:
            parts.append(str(start) if start == layer else f"{start}–{layer}")
            start = None
    return ", ".join(parts)


def window_groups(profile: LongContextProfile) -> list[tuple[int | None, list[int]]]:
    """The layers grouped by their sliding window (None: no window) as the config declares it, the layers without a
    window first, then by window size."""
    windows = sorted(set(profile.windows), key=lambda w: (w is not None, w or 0))
    return [(w, [layer for layer, own in enumerate(profile.windows) if own == w]) for w in windows]


def _group_name(profile: LongContextProfile, window: int | None, layers: list[int]) -> str:
    """"the 3 layers without a window (5, 11, 17)", "the 15 layers with a 512-token window (0–4, …)"."""
    many = "layers" if len(layers) > 1 else "layer"
    kind = "without a window" if window is None else f"with a {window:,}-token window"
    return f"the {len(layers)} {many} {kind} ({_runs(layers)})"


def window_sentence(profile: LongContextProfile, model_name: str) -> str:
    """Which layers have a sliding window (from the config) and what the measured attention past it is."""
    sliding = [layer for layer, w in enumerate(profile.windows) if w is not None]
    if not sliding:
        sees = "every earlier token" if profile.causal else "every token"
        return f"{model_name}'s config declares no sliding window: in every layer a query sees {sees}."
    sizes = sorted({profile.windows[layer] for layer in sliding})
    size = " or ".join(f"{w:,}" for w in sizes)
    said = (f"{len(sliding)} of {len(profile.windows)} layers ({_runs(sliding)}) have a sliding window of {size} tokens "
            f"in {model_name}'s config: a query there sees only the {size} most recent tokens (dashed line).")
    if profile.num_tokens > min(sizes):
        past = max(float(profile.shares[layer][:, profile.edges[:-1] >= profile.windows[layer]].sum(axis=-1).max())
                   for layer in sliding)
        said += f" Measured on this text, the largest share any head of those layers puts past its window is {percent(past, 1)}."
    else:
        said += f" This text has {profile.num_tokens:,} tokens, so the window cuts nothing off here."
    return said


def sink_sentence(profile: LongContextProfile, sink_label: str) -> str:
    """The share on the sink over all heads against uniform attention's, the heads past ``SINK_SHARE``, and the same
    for the later half of the query positions."""
    mean = profile.sink_mean
    even = profile.sink_uniform_mean
    layer, head = (int(x) for x in np.unravel_index(int(np.argmax(mean)), mean.shape))
    count = int((mean >= SINK_SHARE).sum())
    said = (f"Averaged over every head and query, {percent(float(mean.mean()), 1)} of attention lands on {sink_label} "
            f"(uniform attention would put {percent(float(even.mean()), 1)} there); {count} of {mean.size} heads put "
            f"at least {percent(SINK_SHARE)} there, the most {_code(layer, head)} ({percent(float(mean[layer, head]))}).")
    late = profile.queries[profile.queries >= profile.num_tokens // 2]
    if len(late) and late[0] > 1:
        share = float(profile.sink[..., late].mean())
        uniform = float(profile.sink_uniform[:, late].mean())
        said += (f" For the queries from position {late[0]:,} on, it is {percent(share, 1)} (uniform: "
                 f"{percent(uniform, 1)})")
        said += _late_by_window(profile, late) + "."
    return said


def _late_by_window(profile: LongContextProfile, late: np.ndarray) -> str:
    """The late queries' share on the sink per group of layers (``window_groups``), when a window leaves the sink out
    of some of those queries' view: a drop there is the window, not the heads letting go of the sink."""
    last_sink = max(profile.sink_positions, default=0)
    cuts = {w: last_sink + w for w, _ in window_groups(profile) if w is not None and last_sink + w <= late[-1]}
    if not cuts:
        return ""
    parts = []
    for window, layers in window_groups(profile):
        part = f"{percent(float(profile.sink[layers][..., late].mean()), 1)} in {_group_name(profile, window, layers)}"
        if window in cuts:
            part += f", which no longer see the sink from query {cuts[window]:,} on"
        parts.append(part)
    return ": " + "; ".join(parts)
