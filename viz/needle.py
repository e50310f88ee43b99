"""Sentences and the table of the needle-in-a-haystack page, each written from the numbers it states."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from core.attention_heads.retrieval import SENTENCE_END_REACH, DepthLengthGrid, ModelAnswer, RetrievalScores, contains_answer
from core.maths.numbers import percent, probability
from viz.common import CONTROL_ESCAPES, SEQUENTIAL, markdown_safe

# In presentation mode the retrieval-score grid is at most this tall, so that it and its heading fit one 1080-pixel
# slide: drawn by its layer count (220 + 28 per layer) SmolLM2's 30 layers took 1,060 pixels on their own.
SLIDE_GRID_HEIGHT = 1080 - 200  # the heading, its margins and the page's top padding take the rest

# A knock-out "matters more" only when it leaves the answer at least this many times less likely than the other.
CLEAR_FACTOR = 2.0


def answer_text(text: str) -> str:
    """The model's answer as it is quoted: without surrounding whitespace, a newline as ``\\n`` and other control
    characters as their escapes (the app's rule for tokens; spaces stay spaces); not yet escaped for markdown."""
    return text.strip().translate(CONTROL_ESCAPES)


def placement_clause(result: RetrievalScores, depth: float) -> str:
    """Where the needle went, in tokens and as a share of the haystack's tokens, and why when it is not the ``depth``
    asked (a fraction): no sentence end near it."""
    start, end = result.needle_span
    said = f"the needle at tokens {start:,}–{end - 1:,}, {percent(result.needle_depth)} of the way into the haystack"
    if round(result.needle_depth * 100) != round(depth * 100):
        if result.at_sentence_end:
            said += f": the sentence end nearest the {percent(depth)} asked"
        else:
            said += (f": no sentence ends within {percent(SENTENCE_END_REACH)} of the text of the {percent(depth)} "
                     "asked, so it goes between the two words nearest it")
    return said


def answer_sentence(result: RetrievalScores, depth: float, written: ModelAnswer, answer: str) -> str:
    """Markdown: the prompt's length and where the needle went, the model's greedy answer (said to be cut when it stopped
    at its step limit without the expected answer), whether it holds the expected answer, and that answer's
    probability."""
    found = contains_answer(written.text, answer)
    expected = f"“{markdown_safe(answer_text(answer))}”"
    said = (f"After {len(result.prompt_ids):,} tokens ({placement_clause(result, depth)}), the model's greedy answer is "
            f"“{markdown_safe(answer_text(written.text))}”: it {'contains' if found else 'does not contain'} the expected "
            f"answer {expected}")
    if written.cut and not found:
        said += (f" in the {written.tokens} tokens it was let write (it had not ended its answer; the expected one "
                 f"is {result.answer_span[1] - result.answer_span[0]} tokens)")
    return said + (f". Read after the prompt, the expected answer has probability "
                   f"{probability(result.answer_probability)}.")


def scores_sentence(scores: np.ndarray, copyable: int) -> str:
    """What the ``[layers, heads]`` retrieval scores show; ``copyable``: the answer tokens that occur in the needle."""
    copying = int((scores > 0).sum())
    total = scores.size
    if copying == 0:
        return (f"No head of the {total} copied any of the answer's {copyable} needle token(s): at each answer token, "
                "no head attended most to that same token inside the needle.")
    layer, head = (int(x) for x in np.unravel_index(int(np.argmax(scores)), scores.shape))
    best = float(scores[layer, head])
    return (f"{copying} of the {total} heads copied at least one of the answer's {copyable} needle token(s); the best, "
            f"layer {layer} head {head}, copied {round(best * copyable)} of them ({percent(best)}).")


def random_heads_caption(codes_top: str, codes_random: str, only_silent: bool, silent: int) -> str:
    """Which heads were knocked out and how the random ones were drawn (``top_and_random_heads``); ``silent``: how
    many heads score 0."""
    how = (f"drawn at random (seed 0) from the {silent} heads that copied nothing, as Wu et al. draw theirs"
           if only_silent else
           f"drawn at random (seed 0) from every head not in the top, since only {silent} copied nothing: some of them "
           "may score too")
    return f"Top retrieval heads: {codes_top}. Random heads, {how}: {codes_random}."


def knockout_sentence(before: float, top: float, random: float, count: int) -> str:
    """The knock-out comparison from three log-probabilities of the answer (before, ``count`` top heads out, as many
    random heads out). A difference is claimed only past a factor of ``CLEAR_FACTOR``."""
    said = (f"Before any knock-out the answer's probability is {probability(math.exp(before))}; with the top {count} "
            f"retrieval head(s) knocked out it is {probability(math.exp(top))}, with {count} random head(s) "
            f"{probability(math.exp(random))}.")
    margin = math.log(CLEAR_FACTOR)
    if random - top > margin:
        verdict = (f" Knocking out the retrieval heads left the answer {math.exp(random - top):.1f} times less likely "
                   "than knocking out random ones: on this prompt they matter more for it.")
    elif top - random > margin:
        verdict = (f" Knocking out the random heads left the answer {math.exp(top - random):.1f} times less likely "
                   "than knocking out the retrieval heads: on this prompt the top retrieval heads are not what it "
                   "depends on most.")
    else:
        verdict = (f" The two knock-outs leave the answer within a factor of {CLEAR_FACTOR:g} of each other, so these "
                   "numbers do not show that the retrieval heads matter more than random ones here.")
    return said + verdict + " One random draw is one sample: another draw may differ."


def scores_table(scores: np.ndarray) -> pd.DataFrame:
    """The ``[layers, heads]`` scores as rows of (layer, head, retrieval score)."""
    layers, heads = scores.shape
    return pd.DataFrame({"layer": np.repeat(np.arange(layers), heads), "head": np.tile(np.arange(heads), layers),
                         "retrieval score": scores.reshape(-1)})


def grid_heatmap(grid: DepthLengthGrid) -> go.Figure:
    """Depths (rows, 0 % on top) × haystack lengths (columns): the answer's probability as colour, and in each cell the
    probability and ✓ where the answer ranks first at every one of its tokens; cells not measured are blank."""
    depths = [f"{d:.0%}" for d in grid.depths]
    lengths = [f"{n:,}" for n in grid.lengths]
    text = [[("" if not grid.measured[r, c] else probability(grid.probability[r, c]) + (" ✓" if grid.top[r, c] else ""))
             for c in range(len(lengths))] for r in range(len(depths))]
    fig = go.Figure(go.Heatmap(
        z=grid.probability, x=lengths, y=depths, text=text, texttemplate="%{text}", colorscale=SEQUENTIAL, zmin=0,
        zmax=1, xgap=2, ygap=2, colorbar={"title": {"text": "p(answer)"}},
        hovertemplate="needle at %{y} of %{x} tokens: p(answer) %{z:.4f}<extra></extra>",
    ))
    fig.update_xaxes(title_text="haystack length (tokens)", type="category")
    fig.update_yaxes(title_text="needle depth", type="category", autorange="reversed")
    fig.update_layout(title={"text": "The answer's probability by needle depth and haystack length (✓: ranked first)"},
                      height=180 + 48 * len(depths), margin={"l": 80, "r": 20, "t": 70, "b": 60})
    return fig


def grid_sentence(grid: DepthLengthGrid) -> str:
    """What the measured cells of ``grid`` show: how many rank the answer first, the best and worst cell, and the
    shortest against the longest length only past a factor of ``CLEAR_FACTOR`` (averaged over the depths)."""
    measured = int(grid.measured.sum())
    if measured == 0:
        return "No cell of the grid is measured yet."
    said = (f"In {int(grid.top.sum())} of the {measured} cells measured the model ranks the expected answer first at "
            "every one of its tokens (✓).")
    values = np.where(grid.measured, grid.probability, np.nan)
    best = np.unravel_index(int(np.nanargmax(values)), values.shape)
    worst = np.unravel_index(int(np.nanargmin(values)), values.shape)

    def where(cell) -> str:
        return f"the needle at {grid.depths[cell[0]]:.0%} of {grid.lengths[cell[1]]:,} tokens"

    if measured > 1:
        said += (f" Its probability is highest, {probability(values[best])}, with {where(best)}, and lowest, "
                 f"{probability(values[worst])}, with {where(worst)}.")
    for column, rows in grid.shared_placements():
        named = " and ".join(f"{grid.depths[r]:.0%}" for r in rows)
        said += (f" At {grid.lengths[column]:,} tokens the depths {named} put the needle at the same place (token "
                 f"{int(grid.needle_start[rows[0], column]):,}), so their cells measure one placement.")
    full = [c for c in range(len(grid.lengths)) if grid.measured[:, c].all()]
    if len(full) >= 2:
        short, long = full[0], full[-1]
        a, b = float(values[:, short].mean()), float(values[:, long].mean())
        said += (f" Averaged over the depths it is {probability(a)} at {grid.lengths[short]:,} tokens and "
                 f"{probability(b)} at {grid.lengths[long]:,}")
        if a > 0 and b > 0 and max(a, b) / min(a, b) >= CLEAR_FACTOR:
            said += f": {max(a, b) / min(a, b):.1f} times {'lower' if b < a else 'higher'} in the longer haystack."
        else:
            said += f", within a factor of {CLEAR_FACTOR:g}: these cells show no clear effect of length."
    return said


def grid_table(grid: DepthLengthGrid) -> pd.DataFrame:
    """One row per measured cell: depth, haystack length, prompt tokens, the needle's first token, p(answer), ranked
    first at every token."""
    starts = grid.needle_start if grid.needle_start is not None else np.full(grid.measured.shape, -1)
    rows = [(grid.depths[r], grid.lengths[c], int(grid.prompt_tokens[r, c]), int(starts[r, c]),
             float(grid.probability[r, c]), bool(grid.top[r, c]))
            for c in range(len(grid.lengths)) for r in range(len(grid.depths)) if grid.measured[r, c]]
    return pd.DataFrame(rows, columns=["depth", "haystack tokens", "prompt tokens", "needle's first token", "p(answer)",
                                       "ranked first"])
