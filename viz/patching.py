"""Figures and sentences of activation patching and direct logit attribution."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from core.logit_attribution import LogitAttribution
from core.patching import Patching
from core.tokens import quoted_token
from viz.common import token_axis
from viz.predictions import visible_spaces

DIVERGING_SCALE = "RdBu"
# Below this gap between the clean and corrupted logit differences, a fraction of it is mostly noise.
SMALL_GAP = 0.5
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


def patching_sentence(result: Patching, answer: str, wrong: str) -> str:
    """The strongest cell and what 0 and 1 mean here, from the numbers (plain text)."""
    layer, column = np.unravel_index(int(np.nanargmax(result.grid)), result.grid.shape)
    where = (f"head {column} of layer {layer}" if result.kind == "heads"
             else f"layer {layer} at position {column} ({quoted_token(result.tokens[column])})")
    gap = abs(result.clean_diff - result.corrupted_diff)
    caution = (f" The prompts move the logit difference by only {gap:.2f}, so these fractions are mostly noise: "
               "choose prompts the model tells apart more clearly." if gap < SMALL_GAP else "")
    return (f"logit({quoted_token(answer)}) − logit({quoted_token(wrong)}) is {result.clean_diff:.2f} on the clean "
            f"prompt and "
            f"{result.corrupted_diff:.2f} on the corrupted one. Patching {WHAT[result.kind]} restores most at "
            f"{where}: {result.grid[layer, column]:.0%} of the way from corrupted (0) to clean (1).{caution}")


def patching_table(result: Patching) -> dict[str, list]:
    layers, columns = result.grid.shape
    column = "head" if result.kind == "heads" else "position"
    rows = [(l, c) for l in range(layers) for c in range(columns)]
    table = {"layer": [l for l, _ in rows], column: [c for _, c in rows]}
    if result.kind != "heads":
        table["token"] = [result.tokens[c] for _, c in rows]
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
    return (f"{target} is {result.total:.2f}. The largest head contribution is head {head} of layer {layer} "
            f"({result.heads[layer, head]:+.2f}); the largest MLP is layer {mlp}'s ({result.mlps[mlp]:+.2f}); the "
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
