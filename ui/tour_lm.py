"""The guided tour's language-model track (app_pages/tour.py): predict → sample → the lens → induction → patching
→ information flow (ui/tour_flow.py), each step computed now for the causal language model and the text on screen.

The tour offers the track when the model on screen is a causal language model (a decoder with its language-model
head) and opens on it; the switch at the top (``?track=attention``) goes back to the ten steps from tokens to a
corpus, which every model has. ``?track=lm&step=N`` reproduces a step, with its own options in the link too.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import streamlit as st

from core.errors import UserFacingError
from core.maths.margins import leads_from
from core.maths.numbers import fixed, percent, percent_span, probability
from core.model.recording import UnsupportedArchitecture
from core.model.tokens import quoted_token
from core.outputs.causal_lm import encode
from core.outputs.generation import shape_distribution
from core.teaching.examples import PATCHING_PRESETS
from ui import results
from ui.lm_lens import lens_parts
from ui.lm_views import induction_even_share, induction_figure, induction_sentence, induction_table, patching_prompts, token_texts
from ui.lm_writer import generation_key
from ui.models import has_language_model, language_model_of
from ui.page_state import option, set_option
from ui.session import current_model, current_model_name, current_text, current_token_limit
from ui.tour_flow import step_flow
from ui.tour_kit import figure, full_page, not_here, say, try_this
from viz.common import OKABE_ITO, markdown_safe, plotly_safe
from viz.generation import distribution_bars, distribution_table, steps_figure
from viz.patching import MARGIN, patching_heatmap, patching_sentence, patching_table
from viz.predictions import visible_spaces

LM, ATTENTION = "lm", "attention"
TRACKS = {ATTENTION: "From tokens to a corpus", LM: "How a language model predicts"}
INTROS = {
    ATTENTION: "Ten steps from tokens to a whole corpus. Every number is computed now, for the model and text in the "
               "sidebar. Use the buttons or the ← → keys.",
    LM: "Six steps through how a language model writes: what it predicts, how a sampler draws, when the answer "
        "becomes readable in the layers, which heads copy, which activations carry a detail, and which routes "
        "through the layers carried the answer. Every number is computed now, for the model and text in the "
        "sidebar. Use the buttons or the ← → keys.",
}
SAMPLED = 12  # tokens the sampling step writes, greedy and sampled
INDUCTION_LENGTH, INDUCTION_SEED = 40, 0  # the Head statistics page's defaults: its link shows the same scores
IOI = next(iter(PATCHING_PRESETS.values()))


def is_language_model() -> bool:
    """The model on screen is a causal language model with its head (the LM track applies)."""
    model = current_model()
    if not model.is_decoder or model.is_encoder_decoder:
        return False
    name = current_model_name()
    return has_language_model(name) and language_model_of(name).kind == "next"


def choose_track(attention_steps: list) -> tuple[list, str]:
    """The tour's steps and its introduction: for a causal language model a switch between the two tracks (the LM
    track by default), otherwise the attention track alone, as it always was."""
    if not is_language_model():
        return attention_steps, INTROS[ATTENTION]
    track = option(st.segmented_control, "Track", list(TRACKS), format_func=TRACKS.get, default=LM, required=True,
                   key="track", label_visibility="collapsed", on_change=set_option, args=("step", 1))
    return (LM_STEPS if track == LM else attention_steps), INTROS[track]


def _text() -> str | None:
    text = current_text()
    if not text.strip():
        not_here("There is no text yet: type a sentence in the sidebar.")
        return None
    return text


def _q(label: str) -> str:
    """A token as the sentences quote it (``core.model.tokens.quoted_token``: “·Paris”), escaped for markdown."""
    return markdown_safe(quoted_token(label))


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
    best = ", then " + " and ".join(f"{_q(labels[i])} ({probability(d.raw[i])})" for i in (1, 2)
                                    if i < len(labels))
    say(
        f"A language model does one thing: after reading a text it gives every entry of its vocabulary "
        f"({len(d.order):,} tokens for {markdown_safe(name)}) a probability of coming next. After the {len(ids)} "
        f"tokens of your text, the last one {_q(last)}, its top guess is **{_q(labels[0])} at "
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


def sampling_sentence(greedy, sampled, shown: dict[int, str], greedy_text: str, sampled_text: str,
                      temperature: float, seed: int) -> str:
    """The sampling step's sentence (markdown, escaped) from greedy's and the sampler's steps
    (``core.outputs.generation.Step``); each token labelled by ``shown`` (token id → its text decoded for display, part of a
    character as ``<0xD8>``), the written texts ``greedy_text`` and ``sampled_text`` decoded whole."""
    part = next((i for i, (g, s) in enumerate(zip(greedy, sampled)) if g.token_id != s.token_id), None)
    low = min(range(len(sampled)), key=lambda i: sampled[i].probability)
    label = lambda step: _q(shown[step.token_id])  # noqa: E731 - a one-line helper, read where it is used
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
    try:
        result = results.patches(current_model_name(), (clean, corrupted), "residual", answer, wrong,
                                 progress=lambda done, total: bar.progress(
                                     done / total, text=f"{done} of {total} patched runs"))
    except UserFacingError as err:
        bar.empty()
        not_here(markdown_safe(str(err)))
        return
    bar.empty()
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


def moved_sentence(grid: np.ndarray, tokens: list[str], corrupted: list[str], changed: list[int]) -> str:
    """Where the detail is carried, from a residual patching ``grid`` ``[layers, T]`` and the ``changed`` positions
    (none of them the last): the first layer from which the last position restores more than every changed position
    by more than ``MARGIN`` at every later layer, and before it the changed position that restores most (markdown)."""
    last, layers = grid.shape[1] - 1, grid.shape[0]
    moved = leads_from(grid[:, last], grid[:, changed].T, MARGIN)
    end = layers if moved is None else moved
    carrier = max(changed, key=lambda t: float(np.mean(grid[:end, t])) if end else 0.0)
    margin = f"by more than {MARGIN * 100:g} points of the way"
    said = (f"The prompts differ at position{'s' if len(changed) > 1 else ''} {_positions(changed)} "
            f"({', '.join(_q(tokens[t]) for t in changed)} against {', '.join(_q(corrupted[t]) for t in changed)}). ")
    if end:
        said += (f"Patched at {_q(tokens[carrier])} (position {carrier}), "
                 + ("layer 0 restores " if end == 1 else f"layers 0–{end - 1} restore ")
                 + f"{percent_span(grid[:end, carrier])}. ")
    if moved is None:
        return said + (
            f"The last position ({_q(tokens[last])}) restores {percent_span(grid[:, last])} and does not restore more "
            f"than every changed position {margin} even at the last layer: these numbers do not show the detail "
            "moving to where the answer is written.")
    return said + (
        f"From layer {moved} on, the last position ({_q(tokens[last])}) restores more than every changed position "
        f"{margin} at each layer ({percent_span(grid[moved:, last])}, against at most "
        f"{percent(grid[moved:, changed].max())})"
        + (": by then the detail has been moved to where the answer is written." if moved else "."))


def _positions(positions: list[int]) -> str:
    return f"{', '.join(map(str, positions[:-1]))} and {positions[-1]}" if len(positions) > 1 else str(positions[0])


LM_STEPS: list[tuple[str, Callable[[], None]]] = [
    ("What comes next?", step_predict),
    ("Sampling: greedy against a sampler", step_sample),
    ("When the answer becomes readable: the logit lens", step_lens),
    ("Induction heads: copying what came before", step_induction),
    ("Patching: which activations carry a detail", step_patching),
    ("Information flow: how did the model get to its answer?", step_flow),
]
