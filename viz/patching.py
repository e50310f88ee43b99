"""Figures and sentences of activation patching and direct logit attribution."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from core.causal.logit_attribution import LogitAttribution
from core.causal.patching import Patching
from core.maths.margins import runs
from core.maths.numbers import fixed, percent, percent_span
from core.model.tokens import quoted_token, readable_token
from viz.common import token_axis
from viz.predictions import visible_spaces

DIVERGING_SCALE = "RdBu"
# Below this gap between the clean and corrupted logit differences, a fraction of it is mostly noise.
SMALL_GAP = 0.5
# Restored fractions closer than this (5 points of the way) are not told apart: the sentences name every cell within it
# of the best as a plateau, and say one cell restores more than another only when it does by more.
MARGIN = 0.05
NEAR_SHOWN = 3  # positions (or heads) the sentence names among those near the best
# Direct logit attribution: parts within a tenth of a logit of the largest (a factor of about 1.1 in the odds) are
# named beside it rather than ranked below it.
DLA_MARGIN = 0.1
WHAT = {"residual": "the residual stream (input of each block)", "mlp": "each MLP's output",
        "heads": "each head's output (all positions)"}


LAYER_AXIS = {"title": "layer", "autorange": "reversed", "tickmode": "linear", "tick0": 0, "dtick": 1}


def layer_grid_height(layers: int) -> int:
    """Pixels for a layer-per-row heatmap: rows of 22 px, and room for a readable colour bar with two layers."""
    return min(900, 260 + 22 * layers)


def patching_heatmap(result: Patching) -> go.Figure:
    """``result.grid`` as a layer × position (or layer × head) heatmap, 0 = corrupted run, 1 = clean run."""
    layers, columns = result.grid.shape
    if result.kind == "heads":
        xaxis = {"title": "head", "dtick": 1}
        x = list(range(columns))
        hover = "layer %{y}, head %{x}: %{z:.3f}<extra></extra>"
    else:
        names = [visible_spaces(t) for t in result.tokens]
        xaxis = token_axis(names) | {"title": "position (clean prompt's token)"}
        x = list(range(columns))
        hover = "layer %{y}, position %{x}: %{z:.3f}<extra></extra>"
    bound = max(1.0, float(np.nanmax(np.abs(result.grid))))
    fig = go.Figure(go.Heatmap(z=result.grid, x=x, y=list(range(layers)), colorscale=DIVERGING_SCALE, reversescale=True,
                               zmid=0, zmin=-bound, zmax=bound, hovertemplate=hover,
                               colorbar={"title": {"text": "restored"}}))
    fig.update_layout(title=f"Patching {WHAT[result.kind]} from the clean run",
                      xaxis=xaxis, yaxis=LAYER_AXIS, height=layer_grid_height(layers),
                      margin={"l": 60, "r": 20, "t": 50, "b": 80})
    return fig


def _layers(first: int, last: int) -> str:
    return f"layer {first}" if first == last else f"layers {first}–{last}"


def _near_best(result: Patching) -> tuple[int, list[str]]:
    """The cells within ``MARGIN`` of the best: their number, and in words each head, or each position with its runs
    of layers (the ``NEAR_SHOWN`` best, then how many more)."""
    grid = result.grid
    near = grid >= np.nanmax(grid) - MARGIN  # NaN compares False
    if result.kind == "heads":
        cells = sorted(zip(*np.nonzero(near)), key=lambda c: -grid[c])
        said = [f"head {h} of layer {l} ({percent(grid[l, h], 0)})" for l, h in cells]
        unit = "head"
    else:
        columns = sorted(np.flatnonzero(near.any(axis=0)), key=lambda c: -np.nanmax(grid[:, c]))
        said = [f"position {c} ({quoted_token(result.tokens[c])}) at " + " and ".join(_layers(a, b) for a, b in runs(near[:, c]))
                + f" ({percent_span(grid[near[:, c], c])})" for c in columns]
        unit = "position"
    more = len(said) - NEAR_SHOWN
    return int(near.sum()), said[:NEAR_SHOWN] + ([f"{more} more {unit}{'s' if more > 1 else ''}"] if more > 0 else [])


def patching_sentence(result: Patching, answer: str, wrong: str) -> str:
    """What 0 and 1 mean here and where patching restores most: every cell within ``MARGIN`` of the best, as runs of
    layers (a plateau is named as one, not by its noisy argmax), from the numbers (plain text)."""
    layer, column = np.unravel_index(int(np.nanargmax(result.grid)), result.grid.shape)
    where = (f"head {column} of layer {layer}" if result.kind == "heads"
             else f"layer {layer} at position {column} ({quoted_token(result.tokens[column])})")
    gap = abs(result.clean_diff - result.corrupted_diff)
    caution = (f" The prompts move the logit difference by only {fixed(gap)}, so these fractions are mostly noise: "
               "choose prompts the model tells apart more clearly." if gap < SMALL_GAP else "")
    points = f"{MARGIN * 100:g} points"
    count, near = _near_best(result)
    best = percent(result.grid[layer, column], 0)
    where = (f"most at {where}: {best} of the way from corrupted (0) to clean (1); no other "
             f"{'head' if result.kind == 'heads' else 'cell'} comes within {points} of it." if count == 1 else
             f"up to {best} of the way from corrupted (0) to clean (1); {count} "
             f"{'heads' if result.kind == 'heads' else 'cells'} are within {points} of that: {_listed(near)}.")
    return (f"logit({quoted_token(answer)}) − logit({quoted_token(wrong)}) is {fixed(result.clean_diff)} on the clean prompt and "
            f"{fixed(result.corrupted_diff)} on the corrupted one. Patching {WHAT[result.kind]} restores {where}"
            f"{caution}")


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else "; ".join(items[:-1]) + "; and " + items[-1]


def patching_table(result: Patching) -> dict[str, list]:
    layers, columns = result.grid.shape
    column = "head" if result.kind == "heads" else "position"
    rows = [(l, c) for l in range(layers) for c in range(columns)]
    table = {"layer": [l for l, _ in rows], column: [c for _, c in rows]}
    if result.kind != "heads":
        table["token"] = [readable_token(result.tokens[c]) for _, c in rows]
    return table | {"restored": [float(result.grid[l, c]) for l, c in rows],
                    "logit_difference": [float(result.raw[l, c]) for l, c in rows]}


def dla_heatmap(result: LogitAttribution) -> go.Figure:
    """Each head's direct contribution (layer × head) and, in the last column, each MLP's."""
    z = np.concatenate([result.heads, result.mlps[:, None]], axis=1)
    heads = result.heads.shape[1]
    bound = max(1e-9, float(np.abs(z).max()))
    fig = go.Figure(go.Heatmap(z=z, x=list(range(heads + 1)), y=list(range(len(z))), colorscale=DIVERGING_SCALE,
                               reversescale=True, zmid=0, zmin=-bound, zmax=bound,
                               hovertemplate="layer %{y}, %{x}: %{z:.3f}<extra></extra>",
                               colorbar={"title": {"text": "logit diff."}}))
    fig.update_layout(title="Direct contribution of each head and MLP to the logit difference",
                      xaxis={"title": "head (last column: the MLP)", "tickmode": "array",
                             "tickvals": list(range(heads + 1)), "ticktext": [str(h) for h in range(heads)] + ["MLP"]},
                      yaxis=LAYER_AXIS, height=layer_grid_height(len(z)),
                      margin={"l": 60, "r": 20, "t": 50, "b": 60})
    return fig


def dla_sentence(result: LogitAttribution, answer: str, wrong: str | None) -> str:
    """The total and the biggest parts, from the numbers (plain text)."""
    target = f"logit({quoted_token(answer)})" + (f" − logit({quoted_token(wrong)})" if wrong else "")
    layer, head = np.unravel_index(int(np.argmax(np.abs(result.heads))), result.heads.shape)
    mlp = int(np.argmax(np.abs(result.mlps)))
    near_heads = [f"head {h} of layer {l} ({result.heads[l, h]:+.2f})"
                  for l, h in zip(*np.nonzero(np.abs(result.heads) >= abs(result.heads[layer, head]) - DLA_MARGIN))
                  if (l, h) != (layer, head)]
    near_mlps = [f"layer {l}'s ({result.mlps[l]:+.2f})"
                 for l in np.flatnonzero(np.abs(result.mlps) >= abs(result.mlps[mlp]) - DLA_MARGIN) if l != mlp]
    close = lambda near: (f", with {', '.join(near[:NEAR_SHOWN])}{' and more' if len(near) > NEAR_SHOWN else ''} "  # noqa: E731 - a one-line helper, read where it is used
                          f"within {DLA_MARGIN:g} of it" if near else "")
    return (f"{target} is {result.total:.2f}. The largest head contribution is head {head} of layer {layer} "
            f"({result.heads[layer, head]:+.2f}){close(near_heads)}; the largest MLP is layer {mlp}'s "
            f"({result.mlps[mlp]:+.2f}){close(near_mlps)}; the "
            f"embeddings give {result.embeddings:+.2f}" + (f" and biases {result.biases:+.2f}" if abs(result.biases) > 5e-3
                                                          else "") + ". All parts add up to the total.")


def dla_table(result: LogitAttribution) -> dict[str, list]:
    layers, heads = result.heads.shape
    parts = [("embeddings", "", "", result.embeddings)]
    parts += [("head", l, h, float(result.heads[l, h])) for l in range(layers) for h in range(heads)]
    parts += [("mlp", l, "", float(result.mlps[l])) for l in range(layers)]
    parts += [("biases", "", "", result.biases), ("total", "", "", result.total)]
    return {"part": [p[0] for p in parts], "layer": [p[1] for p in parts], "head": [p[2] for p in parts],
            "contribution": [p[3] for p in parts]}
