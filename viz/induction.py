"""The sentence under Does it matter?'s induction knock-out: written from the heads chosen and the losses measured."""

from __future__ import annotations

import numpy as np

from core.model.layers import head_code

MARGIN_STANDARD_ERRORS = 2  # a change in a copy's mean loss counts when it exceeds this many standard errors
MAX_HEADS_NAMED = 5


def loss_change(plain, knocked) -> tuple[float, float]:
    """(mean change, its standard error) of the per-token losses ``plain`` → ``knocked`` (paired, same tokens)."""
    change = np.asarray(knocked, dtype=np.float64) - np.asarray(plain, dtype=np.float64)
    return float(change.mean()), float(change.std(ddof=1) / np.sqrt(len(change))) if len(change) > 1 else float("inf")


def induction_knockout_sentence(result, heads, plain, knocked) -> str:
    """Plain text: the chosen heads' induction scores and ranks, the loss on each copy with and without them, and
    what the two changes say, each change read against ``MARGIN_STANDARD_ERRORS`` standard errors of its tokens."""
    flat = result.scores.ravel()
    named = []
    for layer, head in heads[:MAX_HEADS_NAMED]:
        score = float(result.scores[layer, head])
        named.append(f"{head_code(layer, head, *result.scores.shape)} {score:.3f} (rank {int((flat > score).sum()) + 1} "
                     f"of {flat.size})")
    more = f" and {len(heads) - MAX_HEADS_NAMED} more" if len(heads) > MAX_HEADS_NAMED else ""
    first, first_error = loss_change(plain.first_tokens, knocked.first_tokens)
    second, second_error = loss_change(plain.second_tokens, knocked.second_tokens)
    k = MARGIN_STANDARD_ERRORS
    first_up, second_up = first > k * first_error, second > k * second_error
    apart = second - first > k * float(np.hypot(first_error, second_error))
    if second_up and apart:
        reading = ("The second copy's loss rises more than the first's: these heads help predict the repeat from the "
                   "first copy, as induction heads do.")
    elif first_up and second_up:
        reading = ("The loss rises on both copies by amounts that do not differ beyond their spread: these heads help "
                   "predict tokens in general, not the repeat in particular, which is not what marks an induction head.")
    elif abs(first) <= k * first_error and abs(second) <= k * second_error:
        reading = "Neither copy's loss changes beyond its spread: the model does not need these heads on this test."
    else:
        reading = ("Neither change is the mark of an induction head, which raises the loss on the second copy, where "
                   "the first can be copied from, more than on the first.")
    return (f"On {result.length} random tokens shown twice (Head statistics' induction test), knocking out these heads "
            f"(set to zero) moves the loss on the second copy from {plain.second:.2f} to {knocked.second:.2f} nats per "
            f"token, and on the first copy from {plain.first:.2f} to {knocked.first:.2f} (changes {second:+.2f} ± "
            f"{k * second_error:.2f} and {first:+.2f} ± {k * first_error:.2f}, {k} standard errors of the tokens' "
            f"changes). Their induction scores: {', '.join(named)}{more}. {reading}")
