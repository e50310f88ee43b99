"""The guided tour's language-model track, "How a language model predicts" (``?track=lm``, the default for a causal
language model with its head): six steps from the next-token guess to the routes that carried the answer. The page
(app_pages/tour.py) steps through ``LM_STEPS``; the shared kit is ``ui/tour_kit.py``, the sentences' wording
``viz/tour_sentences.py``."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import streamlit as st
import torch

from core.causal.flow import DEFAULT_THRESHOLD, route_graph
from core.causal.flow_details import route_summary
from core.errors import UserFacingError
from core.maths.numbers import fixed, percent, probability
from core.model.recording import UnsupportedArchitecture
from core.outputs.causal_lm import encode
from core.outputs.generation import shape_distribution
from core.teaching.examples import PATCHING_PRESETS
from ui import results
from ui.figures import main_column_width
from ui.lm_lens import lens_parts
from ui.lm_views import PROMPT_MAX_CHARS, induction_even_share, induction_figure, induction_sentence, induction_table, patching_prompts, token_texts
from ui.lm_writer import generation_key
from ui.models import language_model_of
from ui.page_limits import FLOW_MAX_TOKENS
from ui.page_state import option
from ui.progress_text import FLOW_PROGRESS, bar_progress
from ui.session import current_model, current_model_name, current_text, current_token_limit
from ui.tour_kit import computed, figure, full_page, not_here, say, try_this
from viz.common import OKABE_ITO, markdown_safe, plotly_safe
from viz.flow import edge_table, route_figure
from viz.generation import distribution_bars, distribution_table, steps_figure
from viz.patching import patching_heatmap, patching_sentence, patching_table
from viz.predictions import visible_spaces
from viz.tour_sentences import flow_sentences, moved_sentence, quoted, sampling_sentence

SAMPLED = 12  # tokens the sampling step writes, greedy and sampled
INDUCTION_LENGTH, INDUCTION_SEED = 40, 0  # the Head statistics page's defaults: its link shows the same scores
IOI = next(iter(PATCHING_PRESETS.values()))
FLOW_PROMPT = PATCHING_PRESETS["Capital cities"][0]  # " Paris" on SmolLM2 (its answer there, and its top guess)


def _text() -> str | None:
    text = current_text()
    if not text.strip():
        not_here("There is no text yet: type a sentence in the sidebar.")
        return None
    return text


# --- the steps ---------------------------------------------------------------------------------


def step_predict() -> None:
    text = _text()
    if text is None:
        return
    lm, name = language_model_of(current_model_name()), current_model().name
    ids = encode(lm, text, current_token_limit())
    d = shape_distribution(results.next_token_logits(current_model_name(), text, max_tokens=current_token_limit()))
    labels = token_texts(lm.tokenizer, d.order[:50])
    last = token_texts(lm.tokenizer, ids[-1:])[0]
    best = ", then " + " and ".join(f"{quoted(labels[i])} ({probability(d.raw[i])})" for i in (1, 2)
                                    if i < len(labels))
    say(
        f"A language model does one thing: after reading a text it gives every entry of its vocabulary "
        f"({len(d.order):,} tokens for {markdown_safe(name)}) a probability of coming next. After the {len(ids)} "
        f"tokens of your text, the last one {quoted(last)}, its top guess is **{quoted(labels[0])} at "
        f"{probability(d.raw[0])}**{best}; the ten best together hold {percent(d.raw[:10].sum(), 0)}. The entropy is "
        f"{fixed(d.entropy_before)} nats: as uncertain as a fair choice among {math.exp(d.entropy_before):,.1f} tokens."
    )
    figure(distribution_bars(d, labels), "next-token", pd.DataFrame(distribution_table(d, labels)))
    try_this("add a word to the end of the sidebar's text, or cut one, and watch the top guess change.")
    full_page("predictions", "Open the next-token guesses at every position on the Predictions page")


def step_sample() -> None:
    text = _text()
    if text is None:
        return
    left, right = st.columns(2)
    temperature = float(option(left.slider, "Temperature", 0.05, 3.0, 1.0, 0.05, key="temp"))
    seed = int(option(right.number_input, "Seed", 0, 10**6, 0, key="seed"))
    bar = st.progress(0.0, text="Writing…")
    runs = {}
    for sample in (False, True):
        extra = {"temperature": temperature, "top_k": 0, "top_p": 1.0} if sample else {}
        run, options = generation_key(current_model_name(), text, dict(
            steps=SAMPLED, sample=sample, seed=seed if sample else 0, branch=(), max_tokens=current_token_limit(),
            **extra))  # the Predictions page's key: both share these texts
        runs[sample] = results.generations.at(run, *options, progress=lambda done, total, s=sample: bar.progress(
            (done + s * total) / (2 * total), text=f"{'Sampling' if s else 'Greedy'}: token {done} of {total}"))
    bar.empty()
    greedy, sampled = runs[False].steps, runs[True].steps
    if not sampled or not greedy:
        not_here("The text already fills the model's context, so it cannot write another token.")
        return
    lm = language_model_of(current_model_name())
    ids = sorted({s.token_id for s in greedy + sampled})
    shown = dict(zip(ids, token_texts(lm.tokenizer, ids)))  # part of a character as <0xD8>, not "�"
    written = {run: lm.tokenizer.decode([s.token_id for s in runs[run].steps], clean_up_tokenization_spaces=False)
               for run in runs}  # decoded whole: bytes split across tokens join into their character
    say(sampling_sentence(greedy, sampled, shown, written[False], written[True], temperature, seed))
    fig = steps_figure([shown[s.token_id] for s in sampled], [s.probability for s in sampled], [False] * len(sampled))
    fig.data[0].name = "sampled token"
    fig.add_scatter(x=list(range(len(greedy))), y=[s.probability for s in greedy], mode="markers", name="greedy's token",
                    marker={"color": OKABE_ITO[1], "size": 11, "symbol": "diamond"},
                    customdata=[plotly_safe(visible_spaces(shown[s.token_id])) for s in greedy],
                    hovertemplate="greedy: %{customdata} %{y:.4f}<extra></extra>")
    fig.update_layout(title="The model's probability of each sampled token (bars) and of greedy's (diamonds)",
                      showlegend=True, legend={"orientation": "h", "y": -0.35})
    width = max(len(sampled), len(greedy))
    cell = lambda steps, i, f: f(steps[i]) if i < len(steps) else None  # noqa: E731 - a one-line helper, read where it is used
    figure(fig, f"sampling-t{temperature:g}-seed{seed}", pd.DataFrame({
        "step": range(1, width + 1),
        "sampled_token": [cell(sampled, i, lambda s: shown[s.token_id]) for i in range(width)],
        "sampled_probability": [cell(sampled, i, lambda s: s.probability) for i in range(width)],
        "greedy_token": [cell(greedy, i, lambda s: shown[s.token_id]) for i in range(width)],
        "greedy_probability": [cell(greedy, i, lambda s: s.probability) for i in range(width)]}))
    try_this("raise the temperature to 2 and the sampler's text falls apart; lower it to 0.1 and it writes greedy's.")
    full_page("predictions", "Open this sampler on the Predictions page (top-k, top-p, branches)",
              {"sample": "true", "temp": temperature, "seed": seed, "steps": SAMPLED})


def step_lens() -> None:
    text = _text()
    if text is None:
        return
    try:
        sentence, fig, table = lens_parts(text)
    except UnsupportedArchitecture as err:
        not_here(markdown_safe(str(err)))
        return
    say(
        "When can the next token be read from the layers? The **logit lens** applies the model's own final norm and "
        "head to the hidden state after every layer, as if the model stopped there. It shows when the answer becomes "
        "readable that way, not where it is decided: a hidden state can carry the answer before the head can read "
        "it, and patching (step 5) measures where a detail is carried. Each cell is that layer's top guess at one "
        "position of your text. " + markdown_safe(sentence)
    )
    figure(fig, "logit-lens", table)
    try_this("find a position whose final guess becomes readable only in the last layers, then patch a prompt that "
             "changes it (step 5): the layers that carry the detail can come before the lens reads it.")
    full_page("predictions", "Open the lens on the Predictions page")


def step_induction() -> None:
    model = current_model()
    length = induction_length(model)
    try:
        result = results.inductions(model.name, (), length, INDUCTION_SEED)
    except UserFacingError as err:
        not_here(markdown_safe(str(err)))
        return
    layer, head = np.unravel_index(int(np.argmax(result.scores)), result.scores.shape)
    ratio = float(result.scores[layer, head]) / induction_even_share(result)
    say(
        "Language models copy: if a token appeared before, the token that followed it then is a good guess now. "
        f"An **induction head** does this. To find them, the tour shows {markdown_safe(model.name)} "
        f"{result.length} random tokens twice and measures, for every head, how much attention each token of the "
        f"second copy gives the token right after its earlier occurrence. " + markdown_safe(induction_sentence(result))
        + f" The strongest is {ratio:,.1f} times the even spread."
    )
    figure(induction_figure(result), "induction", induction_table(result))
    try_this("open the Head statistics page and change the seed: a real induction head keeps its score on any tokens.")
    full_page("stats", "Open the induction scores on the Head statistics page",
              {"ind_len": length, "ind_seed": INDUCTION_SEED})


def induction_length(model) -> int:
    """The Head statistics page's 40 random tokens per copy, or fewer when two copies (and a BOS) would not fit."""
    return max(1, min(INDUCTION_LENGTH, (model.max_tokens - 1) // 2))


def step_patching() -> None:
    clean, corrupted, answer, wrong = patching_prompts(IOI)
    if not (clean.strip() and corrupted.strip() and answer and wrong):
        not_here("Fill in both prompts, the answer and the wrong token.")
        return
    bar = st.progress(0.0, text="Patching…")
    result = computed(bar, lambda: results.patches(
        current_model_name(), (clean, corrupted), "residual", answer, wrong,
        progress=lambda done, total: bar.progress(done / total, text=f"{done} of {total} patched runs")))
    if result is None:
        return
    grid, tokens = result.grid, result.tokens
    changed = [t for t, (a, b) in enumerate(zip(tokens, result.corrupted_tokens)) if a != b]
    last = len(tokens) - 1
    said = [f"Two prompts of {len(tokens)} tokens differ in {len(changed)} token{'s' if len(changed) != 1 else ''}, "
            "and the model's preference between the answer and the wrong token changes with them. "
            "**Activation patching** runs the corrupted prompt but copies one hidden state (a layer's input at one "
            "position) from the clean run, and measures how much of the clean answer comes back. "
            + markdown_safe(patching_sentence(result, answer, wrong))]
    before = [t for t in changed if t != last]  # a detail written at the last position has nowhere to move
    if before:
        said.append(moved_sentence(grid, tokens, result.corrupted_tokens, before))
    say(" ".join(said))
    figure(patching_heatmap(result), "patching-residual", pd.DataFrame(patching_table(result)))
    try_this("swap the names in the clean prompt and watch the bright cells follow the changed name.")
    full_page("patching", "Open these prompts on the Patching page (heads, MLPs, attribution)",
              {"clean": clean, "corrupted": corrupted, "answer": answer, "wrong": wrong})


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
    flow = computed(bar, lambda: results.flows(name, prompt, max_tokens=limit, progress=bar_progress(bar, FLOW_PROGRESS)),
                    UnsupportedArchitecture)
    if flow is None:
        return
    recorded, contributions = flow.recorded, flow.contributions
    lm = language_model_of(name)
    labels = token_texts(lm.tokenizer, list(recorded.trace.tokens("self").ids))
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


LM_STEPS: list[tuple[str, Callable[[], None]]] = [
    ("What comes next?", step_predict),
    ("Sampling: greedy against a sampler", step_sample),
    ("When the answer becomes readable: the logit lens", step_lens),
    ("Induction heads: copying what came before", step_induction),
    ("Patching: which activations carry a detail", step_patching),
    ("Information flow: how did the model get to its answer?", step_flow),
]
