"""The guided tour's sentences, written from the numbers each step computed (markdown, every token and text escaped):
both tracks' (``ui/tour_attention.py``, ``ui/tour_language_model.py``)."""

from __future__ import annotations

import numpy as np

from core.causal.flow import RouteGraph, layer_runs
from core.causal.flow_details import ROUTE_MARGIN, RouteSummary
from core.maths.margins import leads_from
from core.maths.numbers import fixed, percent, percent_span, probability
from core.model.tokens import quoted_token
from viz.common import markdown_safe
from viz.patching import MARGIN


def quoted(label: str) -> str:
    """A token as the sentences quote it (``core.model.tokens.quoted_token``: “·Paris”), escaped for markdown."""
    return markdown_safe(quoted_token(label))


def at_token(labels: list[str], position: int) -> str:
    """A token and its position: “·Paris” (token 5)."""
    return f"{quoted(labels[position])} (token {position})"


def and_list(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def positions_phrase(positions: list[int]) -> str:
    """``3`` or ``3, 5 and 7``."""
    return f"{', '.join(map(str, positions[:-1]))} and {positions[-1]}" if len(positions) > 1 else str(positions[0])


# --- the attention track ---


def id_phrase(ids: list[int]) -> str:
    """``token id 2924``, or ``token ids 2924 and 1012`` for a word in pieces (never a Python list)."""
    return f"token id {ids[0]}" if len(ids) == 1 else f"token ids {', '.join(map(str, ids[:-1]))} and {ids[-1]}"


# One knock-out on one text: two heads' changes of the sentence embedding (1 − cosine) within a factor of 1.5 of each
# other are not told apart, since another text can swap their order; the step says "about as much".
KNOCKOUT_RATIO = 1.5


def knockout_comparison(sink_change: float, previous_change: float, sinks: str) -> str:
    """The sentence comparing two knock-outs' changes of the sentence embedding (1 − cosine): the head that looks
    hardest at ``sinks`` and the previous-token head; within ``KNOCKOUT_RATIO`` of each other it is "about as much"."""
    low, high = sorted((sink_change, previous_change))
    if high <= low * KNOCKOUT_RATIO:
        more = "about as much as"
    else:
        more = "less than" if sink_change < previous_change else "more than"
    return (f"So the head that looks hardest at {sinks} changes your sentence {more} the previous-token head "
            f"({sink_change:.2g} vs {previous_change:.2g} in 1 − cosine): one knock-out on one text, and where "
            "attention and importance disagree the importance map shows it.")


KNOCKOUT_CAVEAT = ("A heatmap shows where a head looks, not what it changes (Jain & Wallace 2019): whether a head matters "
                   "is a question for an experiment, switching it off and measuring what changes.")


def knockout_sentences(sink: tuple | None, previous: tuple | None, chance: float, effects: dict, sinks: str, total: int,
                       mean_sink: float) -> str:
    """The knock-out step's sentences (markdown): the caveat, then what zero-ablating the head that looks hardest at
    ``sinks`` (``sink``: layer, head, share) and the previous-token head (``previous``; ``chance`` the even spread's
    share) did to the sentence embedding (``effects``: 1 − cosine per (layer, head)); ``mean_sink`` over ``total``
    heads."""
    said = [KNOCKOUT_CAVEAT]
    if sink is not None:
        said.append(f"On your text **layer {sink[0]}, head {sink[1]}** gives the largest share of its attention to "
                    f"{sinks}, **{percent(sink[2])}** (the mean over all {total} heads is {percent(mean_sink, 1)}); "
                    f"zero-ablated, it leaves the sentence embedding at cosine **{1 - effects[sink[:2]]:.4f}** to the "
                    "original run.")
    if previous is not None and (sink is None or previous[:2] != sink[:2]):
        said.append(f"The previous-token head of step 4, **layer {previous[0]}, head {previous[1]}** "
                    f"({percent(previous[2])} to the token before; an even spread gives {percent(chance)}), leaves it at cosine "
                    f"**{1 - effects[previous[:2]]:.4f}**.")
    if len(effects) == 2:
        said.append(knockout_comparison(effects[sink[:2]], effects[previous[:2]], sinks))
    else:
        said.append(f"1 − cosine is {next(iter(effects.values())):.2g}; the importance map compares it with every other head.")
    return " ".join(said)


# --- the language-model track ---


def sampling_sentence(greedy, sampled, shown: dict[int, str], greedy_text: str, sampled_text: str,
                      temperature: float, seed: int) -> str:
    """The sampling step's sentence (markdown, escaped) from greedy's and the sampler's steps
    (``core.outputs.generation.Step``); each token labelled by ``shown`` (token id → its text decoded for display, part of a
    character as ``<0xD8>``), the written texts ``greedy_text`` and ``sampled_text`` decoded whole."""
    part = next((i for i, (g, s) in enumerate(zip(greedy, sampled)) if g.token_id != s.token_id), None)
    low = min(range(len(sampled)), key=lambda i: sampled[i].probability)
    label = lambda step: quoted(shown[step.token_id])  # noqa: E731 - a one-line helper, read where it is used
    return (
        f"**Greedy** decoding always takes the top token; after your text it writes “{markdown_safe(greedy_text)}”. A "
        f"**sampler** draws each token at random from the distribution, here divided by a temperature of "
        f"{temperature:g} (below 1 sharpens it, above 1 flattens it) with seed {seed}, and writes "
        f"“{markdown_safe(sampled_text)}”. "
        + (f"The two part at token {part + 1}, where the sampler drew {label(sampled[part])} (the model gives it "
           f"{probability(sampled[part].probability)}) instead of {label(greedy[part])} "
           f"({probability(greedy[part].probability)}). " if part is not None else
           f"Here both write the same {len(sampled)} tokens. ")
        + f"The least likely token the sampler drew is {label(sampled[low])} at "
        f"**{probability(sampled[low].probability)}**; the mean probability of its tokens is "
        f"{probability(np.mean([s.probability for s in sampled]))}, against "
        f"{probability(np.mean([s.probability for s in greedy]))} for greedy's."
    )


def moved_sentence(grid: np.ndarray, tokens: list[str], corrupted: list[str], changed: list[int]) -> str:
    """Where the detail is carried, from a residual patching ``grid`` ``[layers, T]`` and the ``changed`` positions
    (none of them the last): the first layer from which the last position restores more than every changed position
    by more than ``MARGIN`` at every later layer, and before it the changed position that restores most (markdown)."""
    last, layers = grid.shape[1] - 1, grid.shape[0]
    moved = leads_from(grid[:, last], grid[:, changed].T, MARGIN)
    end = layers if moved is None else moved
    carrier = max(changed, key=lambda t: float(np.mean(grid[:end, t])) if end else 0.0)
    margin = f"by more than {MARGIN * 100:g} points of the way"
    said = (f"The prompts differ at position{'s' if len(changed) > 1 else ''} {positions_phrase(changed)} "
            f"({', '.join(quoted(tokens[t]) for t in changed)} against {', '.join(quoted(corrupted[t]) for t in changed)}). ")
    if end:
        said += (f"Patched at {quoted(tokens[carrier])} (position {carrier}), "
                 + ("layer 0 restores " if end == 1 else f"layers 0–{end - 1} restore ")
                 + f"{percent_span(grid[:end, carrier])}. ")
    if moved is None:
        return said + (
            f"The last position ({quoted(tokens[last])}) restores {percent_span(grid[:, last])} and does not restore more "
            f"than every changed position {margin} even at the last layer: these numbers do not show the detail "
            "moving to where the answer is written.")
    return said + (
        f"From layer {moved} on, the last position ({quoted(tokens[last])}) restores more than every changed position "
        f"{margin} at each layer ({percent_span(grid[moved:, last])}, against at most "
        f"{percent(grid[moved:, changed].max())})"
        + (": by then the detail has been moved to where the answer is written." if moved else "."))


def flow_sentences(graph: RouteGraph, summary: RouteSummary, labels: list[str], model_name: str, answer: str,
                   answer_probability: float) -> str:
    """The step's sentences (markdown, escaped): the model's answer, which earlier tokens carry the route into the
    last token (two within ``ROUTE_MARGIN`` not ranked), through which layers, and which heads carry the largest of
    those edges. ``labels``: each position's token text; ``answer``: the top guess's text."""
    last = summary.position
    said = [f"**How did {markdown_safe(model_name)} get to {quoted(answer)}?** After the {len(labels)} tokens of the "
            f"prompt, ending with {quoted(labels[last])}, its top guess is {quoted(answer)} at {probability(answer_probability)}. "
            f"The information-flow graph follows that guess back from the last token's last representation: it keeps "
            f"every edge that carries more than {graph.threshold:.2f} of what reaches its node (how much closer the "
            f"edge's term brings the node than its absence would), down through the layers to the input tokens; "
            f"here {len(graph.edges)} edges."]
    if not summary.carriers:
        said.append(f"At this threshold no attention edge brings information from another position into "
                    f"{at_token(labels, last)}: every edge kept stays at its own position.")
        return " ".join(said)
    moving = "Of the attention edges that move information from one position to another on this route"
    if summary.tied == 1:
        top, total, layers, count = summary.carriers[0]
        sentence = (f"{moving}, those from {at_token(labels, top)} carry the most: {count} edge{'s' if count != 1 else ''} "
                    f"in {layer_runs(layers)}, whose shares add up to {fixed(total)} (each a share of its own "
                    "node's inputs, so a sum can pass 1)")
        if len(summary.carriers) > 1:
            second, second_total, _, _ = summary.carriers[1]
            sentence += f"; next comes {at_token(labels, second)} with {fixed(second_total)}"
        said.append(sentence + ".")
    else:
        tied = summary.carriers[:summary.tied]
        said.append(f"{moving}, those from " + and_list([at_token(labels, p) for p, _, _, _ in tied])
                    + " carry about as much, within " + f"{ROUTE_MARGIN:.2f} of each other: "
                    + and_list([f"{fixed(total)} ({layer_runs(layers)})" for _, total, layers, _ in tied]) + ".")
    heads = summary.heads
    parts = [f"layer {h.layer}, head {h.head} ({percent(h.share)} of what reaches {at_token(labels, h.query)} after layer "
             f"{h.layer}'s attention, from {at_token(labels, h.key)})" for h in heads]
    close = len(heads) > 1 and heads[1].share >= heads[0].share - ROUTE_MARGIN
    said.append(f"The largest of these edges {'is' if len(heads) == 1 else 'are'} carried by " + and_list(parts)
                + (f"; the first two differ by less than {ROUTE_MARGIN:.2f}, so their order says little." if close
                   else "."))
    return " ".join(said)
