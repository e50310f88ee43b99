"""The guided tour's information-flow step (the language-model track of ui/tour_lm.py): how the model got to its
answer on the capital-of-France prompt, read off the route graph of ``core.causal.flow`` (Ferrando & Voita 2024)."""

from __future__ import annotations

import numpy as np
import streamlit as st
import torch

from core.causal.flow import DEFAULT_THRESHOLD, RouteGraph, layer_runs, route_graph
from core.causal.flow_details import ROUTE_MARGIN, RouteSummary, route_summary
from core.maths.numbers import fixed, percent, probability
from core.model.recording import UnsupportedArchitecture
from core.model.tokens import quoted_token
from core.teaching.examples import PATCHING_PRESETS
from ui import results
from ui.figures import main_column_width
from ui.lm_views import PROMPT_MAX_CHARS, token_texts
from ui.models import language_model_of
from ui.page_limits import FLOW_MAX_TOKENS
from ui.page_state import option
from ui.progress_text import FLOW_PROGRESS, bar_progress
from ui.session import current_model, current_model_name, current_token_limit
from ui.tour_kit import figure, full_page, not_here, say, try_this
from viz.common import markdown_safe
from viz.flow import edge_table, route_figure

FLOW_PROMPT = PATCHING_PRESETS["Capital cities"][0]  # " Paris" on SmolLM2 (its answer there, and its top guess)


def _q(label: str) -> str:
    return markdown_safe(quoted_token(label))


def _at(labels: list[str], position: int) -> str:
    return f"{_q(labels[position])} (token {position})"


def step_flow() -> None:
    left, right = st.columns([2, 1])
    prompt = option(left.text_input, "Prompt", FLOW_PROMPT, key="prompt", help=f"At most {PROMPT_MAX_CHARS} characters.")
    threshold = option(right.slider, "Threshold (share of a node's inputs)", 0.01, 0.5, DEFAULT_THRESHOLD, 0.01,
                       key="threshold")
    if not prompt.strip():
        not_here("Type a prompt to follow the model's answer back through its layers.")
        return
    if len(prompt) > PROMPT_MAX_CHARS:
        not_here(f"The prompt has {len(prompt):,} characters, more than the {PROMPT_MAX_CHARS} it may have.")
        return
    name, limit = current_model_name(), min(current_token_limit(), FLOW_MAX_TOKENS)
    bar = st.empty()
    try:
        flow = results.flows(name, prompt, max_tokens=limit, progress=bar_progress(bar, FLOW_PROGRESS))
    except UnsupportedArchitecture as err:
        bar.empty()
        not_here(markdown_safe(str(err)))
        return
    bar.empty()
    recorded, contributions = flow.recorded, flow.contributions
    lm = language_model_of(name)
    labels = token_texts(lm.tokenizer, list(recorded.input_ids))
    last = recorded.num_tokens - 1
    logits = results.next_token_logits(name, prompt, max_tokens=limit)
    probabilities = torch.softmax(logits.double(), dim=-1).cpu().numpy()
    answer = int(np.argmax(probabilities))
    graph = route_graph(contributions, last, threshold)
    say(flow_sentences(graph, route_summary(graph), labels, current_model().name,
                       token_texts(lm.tokenizer, [answer])[0], float(probabilities[answer])))
    figure(route_figure(graph, labels, contributions.num_layers, width_px=main_column_width(),
                        title=f"Route into “{labels[last]}” (token {last}), threshold {threshold:.2f}"),
           "flow", edge_table(graph, labels))
    try_this("open the graph on its page and click an edge: the head's attention row and the tokens it writes, "
             "or an MLP's top neurons.")
    full_page("flow", "Open this route on the Information flow page",
              {"text": prompt, "token": last, "threshold": threshold})


def flow_sentences(graph: RouteGraph, summary: RouteSummary, labels: list[str], model_name: str, answer: str,
                   answer_probability: float) -> str:
    """The step's sentences (markdown, escaped): the model's answer, which earlier tokens carry the route into the
    last token (two within ``ROUTE_MARGIN`` not ranked), through which layers, and which heads carry the largest of
    those edges. ``labels``: each position's token text; ``answer``: the top guess's text."""
    last = summary.position
    said = [f"**How did {markdown_safe(model_name)} get to {_q(answer)}?** After the {len(labels)} tokens of the "
            f"prompt, ending with {_q(labels[last])}, its top guess is {_q(answer)} at {probability(answer_probability)}. "
            f"The information-flow graph follows that guess back from the last token's last representation: it keeps "
            f"every edge that carries more than {graph.threshold:.2f} of what reaches its node (how much closer the "
            f"edge's term brings the node than its absence would), down through the layers to the input tokens; "
            f"here {len(graph.edges)} edges."]
    if not summary.carriers:
        said.append(f"At this threshold no attention edge brings information from another position into "
                    f"{_at(labels, last)}: every edge kept stays at its own position.")
        return " ".join(said)
    moving = "Of the attention edges that move information from one position to another on this route"
    if summary.tied == 1:
        top, total, layers, count = summary.carriers[0]
        sentence = (f"{moving}, those from {_at(labels, top)} carry the most: {count} edge{'s' if count != 1 else ''} "
                    f"in {layer_runs(layers)}, whose shares add up to {fixed(total)} (each a share of its own "
                    "node's inputs, so a sum can pass 1)")
        if len(summary.carriers) > 1:
            second, second_total, _, _ = summary.carriers[1]
            sentence += f"; next comes {_at(labels, second)} with {fixed(second_total)}"
        said.append(sentence + ".")
    else:
        tied = summary.carriers[:summary.tied]
        said.append(f"{moving}, those from " + _and([_at(labels, p) for p, _, _, _ in tied])
                    + " carry about as much, within " + f"{ROUTE_MARGIN:.2f} of each other: "
                    + _and([f"{fixed(total)} ({layer_runs(layers)})" for _, total, layers, _ in tied]) + ".")
    heads = summary.heads
    parts = [f"layer {h.layer}, head {h.head} ({percent(h.share)} of what reaches {_at(labels, h.query)} after layer "
             f"{h.layer}'s attention, from {_at(labels, h.key)})" for h in heads]
    close = len(heads) > 1 and heads[1].share >= heads[0].share - ROUTE_MARGIN
    said.append(f"The largest of these edges {'is' if len(heads) == 1 else 'are'} carried by " + _and(parts)
                + (f"; the first two differ by less than {ROUTE_MARGIN:.2f}, so their order says little." if close
                   else "."))
    return " ".join(said)


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
