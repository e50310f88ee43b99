"""Sentences and the table of the needle-in-a-haystack page, each written from the numbers it states."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from viz.wording import percent, probability

# A knock-out "matters more" only when it leaves the answer at least this many times less likely than the other.
CLEAR_FACTOR = 2.0


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
