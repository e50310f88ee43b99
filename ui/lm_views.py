"""Streamlit glue for issue 27's language-model views: sampling, step-by-step generation, patching,
direct logit attribution and induction scores. Results are cached per process, one model run at a time."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st
import torch

from core.errors import UserFacingError
from core.maths.numbers import fixed, percent, probability
from core.model.layers import head_code
from core.model.recording import UnsupportedArchitecture
from core.model.tokens import decoded_tokens, quoted_token, readable_token
from core.outputs.generation import Distribution, branch_from_param, branch_to_param, shape_distribution
from ui import results
from ui.errors import friendly_fragment
from ui.explain import explain
from ui.figures import show_figure
from ui.lm_writer import TOKENS_WRITTEN, finished, generation_key, keep_writing, resume, stopped, write_chunk
from ui.models import has_language_model, language_model_of
from ui.page_state import end_page, option, set_option
from ui.session import current_model_name, current_token_limit
from ui.stoppable import progress_with_stop
from viz.common import file_stem, markdown_safe
from viz.generation import distribution_bars, distribution_sentence, distribution_table, steps_figure
from viz.head_stats import head_heatmap
from viz.induction import induction_knockout_sentence
from viz.patching import dla_heatmap, dla_sentence, dla_table, patching_heatmap, patching_sentence, patching_table

MAX_STEPS = 40
# The loss is a mean over at most 40 random tokens: a change below 0.05 nats per token (5% in perplexity) is too small
# to read as the knocked-out heads' effect, so the knock-out sentence calls it "about the same".
LOSS_MARGIN = 0.05
# Induction scores come from one draw of random tokens: a head within 5 points of the strongest is named beside it
# rather than ranked below it (the same 5 points as the patching sentences' margin).
INDUCTION_MARGIN = 0.05


def token_texts(tokenizer, ids) -> list[str]:
    """Each token id decoded on its own for display (``core.model.tokens.decoded_tokens``)."""
    return decoded_tokens(tokenizer, ids)


def _heading(title: str, about: str):
    """The section's title and explanation; returns the language model and three columns for its controls."""
    st.header(title)
    explain(about)
    return language_model_of(current_model_name()), st.columns(3)


@friendly_fragment
def sampling_and_generation(text: str) -> None:
    """The sampling controls and the generation that uses them, rerun together (and only they) on a change."""
    controls = sampling_view(text)
    generation_view(text, controls)


def sampling_view(text: str) -> dict:
    """Temperature, top-k and top-p reshaping the next-token distribution after ``text`` (reruns only itself:
    the logits are computed once per text, a slider only reshapes them)."""
    lm, (a, b, c) = _heading(
        "Sampling the next token",
        "A sampler divides the logits by the **temperature** (below 1 sharpens, above 1 flattens), keeps the **top-k** "
        "most likely tokens (0 keeps all), then the smallest set of best tokens whose probability reaches **top-p**, "
        "and renormalises what is left. Grey bars are cut: they can never be drawn.")
    temperature = option(a.slider, "Temperature", 0.05, 3.0, 1.0, 0.05, key="temp")
    top_k = option(b.slider, "Top-k (0 = off)", 0, 100, 0, key="topk")
    top_p = option(c.slider, "Top-p", 0.05, 1.0, 1.0, 0.05, key="topp")
    # The logits after the last token come from the Predictions page's own pass (a second pass over a 512-token
    # text would cost seconds); they equal ui.results.next_token_logits' bit for bit.
    logits = torch.tensor(results.predictions(current_model_name(), text, max_tokens=current_token_limit()).last_logits)
    d: Distribution = shape_distribution(logits, temperature=float(temperature), top_k=int(top_k), top_p=float(top_p))
    labels = token_texts(lm.tokenizer, d.order[:50])
    st.markdown(markdown_safe(distribution_sentence(d, labels)))
    show_figure(distribution_bars(d, labels), name=file_stem(current_model_name(), "sampling", temperature, top_k, top_p),
                data=lambda: pd.DataFrame(distribution_table(d, labels)), key="sampling-bars")
    return dict(temperature=float(temperature), top_k=int(top_k), top_p=float(top_p))


def generation_view(text: str, controls: dict) -> None:
    """Step-by-step generation with each token's alternatives; clicking one continues from it (in the link)."""
    lm, (a, b, c) = _heading(
        "Generation step by step",
        "The model writes one token at a time. Greedy takes the most likely token every time; sampling draws from the "
        "distribution shaped by the sliders above, with a seed, so the same link writes the same text. Under each "
        "token are the ones it did not choose: click one to continue the text from there.")
    sample = option(a.toggle, "Sample (instead of greedy)", key="sample")
    seed = option(b.number_input, "Seed", 0, 10**6, 0, key="seed")
    steps = option(c.slider, "Tokens to write", 1, MAX_STEPS, 10, key="steps")
    branch = branch_from_param(option(st.text_input, "Branch (token ids chosen by hand)", "", key="branch"),
                               len(lm.tokenizer))
    controls = controls if sample else {}  # greedy ignores them: the same cached text for every slider position
    kwargs = dict(steps=int(steps), sample=bool(sample), seed=int(seed), branch=tuple(branch),
                  max_tokens=current_token_limit(), **controls)
    key = generation_key(current_model_name(), text, kwargs)  # ui.results.generations': the tour shares it
    g = finished(key) or stopped(key)
    if g is None:  # the first chunk now (a short generation ends here), the rest a chunk at a time, with Stop
        with progress_with_stop("Writing…", TOKENS_WRITTEN) as progress:  # no Stop: this run writes a short chunk
            g = write_chunk(key, progress)
    if g is None:
        keep_writing(key)
        return
    st.code(g.text, language=None, wrap_lines=True)
    if g.stopped:
        st.info(f"Stopped after {len(g.steps)} of {max(int(steps), len(branch))} tokens; the text so far is kept.",
                icon=":material/stop_circle:")
        st.button("Continue writing", key="generation-continue", icon=":material/play_arrow:", on_click=resume,
                  args=(key,))
    if not g.steps:
        st.info("The model could not write any token (the text already fills its context).", icon=":material/info:")
        return
    probs = [s.probability for s in g.steps]
    low = min(range(len(probs)), key=probs.__getitem__)
    ids = sorted({s.token_id for s in g.steps} | {t for s in g.steps for t, _, _ in s.alternatives})
    shown = dict(zip(ids, token_texts(lm.tokenizer, ids)))  # for display: part of a character as <0xD8>, not "�"
    st.markdown(markdown_safe(
        f"{len(g.steps)} tokens written ({'sampled with seed ' + str(seed) if sample else 'greedy'}"
        f"{', the first ' + str(len(branch)) + ' chosen by hand' if branch else ''}). The least certain step is "
        f"{low + 1}, {quoted_token(shown[g.steps[low].token_id])} at {probability(probs[low])}"
        + (" ; the model then wrote its end-of-text token." if g.ended else ".")))
    show_figure(steps_figure([shown[s.token_id] for s in g.steps], probs, [s.chosen for s in g.steps]),
                name=file_stem(current_model_name(), "generation"), key="generation-steps",
                data=lambda: pd.DataFrame(generation_table(g.steps, shown)))
    for i, step in enumerate(g.steps[:MAX_STEPS]):
        cols = st.columns([2] + [1] * len(step.alternatives))
        cols[0].markdown(f"**{i + 1}.** {markdown_safe(quoted_token(shown[step.token_id]))} {probability(step.probability)}")
        for col, (token, _, p) in zip(cols[1:], step.alternatives):
            new = branch_to_param(list(g.token_ids[:i]) + [token])
            col.button(f"{markdown_safe(quoted_token(shown[token]))} {percent(p, 0)}", key=f"alt-{i}-{token}",
                       on_click=set_option, args=("branch", new),
                       help="Continue the text from this token instead")
    if branch:
        st.button("Back to the model's own choices", on_click=set_option, args=("branch", ""), key="branch-clear")


def generation_table(steps, shown: dict[int, str]) -> list[dict]:
    """The generation's CSV rows, one per step of ``steps``; the alternatives written by the token-label rule from
    ``shown`` (token id → its text decoded for display, ``token_texts``), "·my 0.123", not Python's repr."""
    return [{"step": i + 1, "token_id": s.token_id, "token": s.text, "probability": s.probability,
             "chosen_by_hand": s.chosen,
             "alternatives": " | ".join(f"{readable_token(shown[t])} {p:.3f}" for t, _, p in s.alternatives)}
            for i, s in enumerate(steps)]


def friendly_lm_error(err: Exception) -> None:
    """A sentence for an error that the user's input caused (lengths, multi-token answers, architecture)."""
    if isinstance(err, UnsupportedArchitecture):
        st.info(str(err), icon=":material/info:")
    else:
        st.warning(markdown_safe(str(err)), icon=":material/warning:")


PROMPT_MAX_CHARS, TOKEN_MAX_CHARS = 400, 40


def patching_prompts(defaults: tuple[str, str, str, str]) -> tuple[str, str, str, str]:
    """The clean and corrupted prompts, the answer and the wrong token, as four text boxes in two rows (options
    ``clean``, ``corrupted``, ``answer`` and ``wrong`` of the page, ``defaults`` in that order); their values.

    A value over its limit ends the page with a sentence saying so. The limits are checked here, not given to the
    boxes as ``max_chars``: the browser drops a change longer than a box's ``max_chars`` without a word (a paste of
    401 characters left the box as it was)."""
    prompt_help, token_help = f"At most {PROMPT_MAX_CHARS} characters.", f"At most {TOKEN_MAX_CHARS} characters."
    left, right = st.columns(2)
    clean = option(left.text_input, "Clean prompt", defaults[0], key="clean", help=prompt_help)
    corrupted = option(right.text_input, "Corrupted prompt (same number of tokens)", defaults[1], key="corrupted",
                       help=prompt_help)
    left, right = st.columns(2)
    answer = option(left.text_input, "Answer (one token, with its leading space)", defaults[2], key="answer",
                    help=token_help)
    wrong = option(right.text_input, "Wrong token", defaults[3], key="wrong", help=token_help)
    too_long = [f"The {name} has {len(value):,} characters, more than the {limit} it may have."
                for name, value, limit in (("clean prompt", clean, PROMPT_MAX_CHARS),
                                           ("corrupted prompt", corrupted, PROMPT_MAX_CHARS),
                                           ("answer", answer, TOKEN_MAX_CHARS), ("wrong token", wrong, TOKEN_MAX_CHARS))
                if len(value) > limit]
    if too_long:
        st.warning(" ".join(too_long) + f" Shorten {'it' if len(too_long) == 1 else 'them'} to patch: nothing is "
                   "computed until then.",
                   icon=":material/warning:")
        end_page()
    return clean, corrupted, answer, wrong


def patching_view(kind: str, clean: str, corrupted: str, answer: str, wrong: str) -> None:
    """One patching grid, with progress, its sentence and its exports."""
    bar = st.progress(0.0, text="Patching…")
    try:
        result = results.patches(current_model_name(), (clean, corrupted), kind, answer, wrong,
                                 progress=lambda done, total: bar.progress(
                                     done / total, text=f"{done} of {total} patched runs"))
    except UserFacingError as err:
        bar.empty()
        friendly_lm_error(err)
        return
    bar.empty()
    st.markdown(markdown_safe(patching_sentence(result, answer, wrong)))
    show_figure(patching_heatmap(result), name=file_stem(current_model_name(), "patching", kind),
                data=lambda: pd.DataFrame(patching_table(result)), key=f"patching-{kind}")


def dla_view(text: str, answer: str, wrong: str) -> None:
    """Direct logit attribution of ``text``'s last position, its sentence and its exports."""
    try:
        result = results.logit_attributions(current_model_name(), text, answer, wrong or None)
    except UserFacingError as err:
        friendly_lm_error(err)
        return
    st.markdown(markdown_safe(dla_sentence(result, answer, wrong or None)))
    show_figure(dla_heatmap(result), name=file_stem(current_model_name(), "direct-logit-attribution"),
                data=lambda: pd.DataFrame(dla_table(result)), key="dla")


def induction_view(model) -> None:
    """Induction scores of every head of ``model`` on repeated random tokens (length and seed in the link)."""
    st.header("Induction heads")
    explain("A sequence of random tokens is shown twice. At each token of the second copy, an **induction head** "
            "attends to the token that came right after the same token in the first copy, so the model can predict "
            "what comes next by copying. The score is that attention, averaged over the second copy (1 = all of it).")
    left, right = st.columns(2)
    length = option(left.slider, "Random tokens per copy", 5, 100, 40, key="ind_len")
    seed = option(right.number_input, "Seed", 0, 10**6, 0, key="ind_seed")
    try:
        result = results.inductions(model.name, (), int(length), int(seed))
    except UserFacingError as err:
        st.warning(markdown_safe(str(err)), icon=":material/warning:")
        return
    st.markdown(markdown_safe(induction_sentence(result)))
    knockout_sentence(result, int(seed))
    show_figure(induction_figure(result), name=file_stem(current_model_name(), "induction", length, seed),
                key="stats-induction", data=lambda: induction_table(result))


def induction_even_share(result) -> float:
    """The mean attention a head spreading its attention evenly over what it can see gives the induction target."""
    queries = np.arange(result.prefix + result.length, result.prefix + 2 * result.length)
    return float(np.mean(1 / (queries + 1)))


def induction_sentence(result) -> str:
    """The strongest induction head against an even spread, and how many heads score above 40% (plain text)."""
    layer, head = np.unravel_index(int(np.argmax(result.scores)), result.scores.shape)
    best = float(result.scores[layer, head])
    strong = int((result.scores > 0.4).sum())
    near = [(l, h) for l, h in zip(*np.nonzero(result.scores >= best - INDUCTION_MARGIN)) if (l, h) != (layer, head)]
    close = (f" (within {INDUCTION_MARGIN * 100:g} points of it: "
             + ", ".join(f"head {h} of layer {l} at {percent(result.scores[l, h])}" for l, h in near[:3])
             + (f" and {len(near) - 3} more" if len(near) > 3 else "") + ")") if near else ""
    return (f"The strongest is head {head} of layer {layer}: {percent(best)} of its attention goes to "
            f"the token after the earlier occurrence (a head spreading its attention evenly over the tokens it can see "
            f"would give {percent(induction_even_share(result), 1)}){close}. {strong} head{'s' if strong != 1 else ''} score "
            f"above 40%.")


def induction_figure(result):
    return head_heatmap(result.scores, title="Induction score", colorbar="score", share=True)


def induction_table(result) -> pd.DataFrame:
    return pd.DataFrame([{"layer": l, "head": h, "induction_score": float(result.scores[l, h])}
                         for l in range(result.scores.shape[0]) for h in range(result.scores.shape[1])])


KNOCKED_OUT = 3


def strongest_induction_heads(result, count: int = KNOCKED_OUT) -> list[tuple[int, int]]:
    """The ``count`` heads with the highest induction scores, strongest first."""
    order = np.argsort(result.scores.ravel())[::-1][:count]
    return [tuple(int(v) for v in np.unravel_index(int(i), result.scores.shape)) for i in order]


def repeat_losses(result, heads, seed: int):
    """``(plain, knocked)``: ``core.attention_heads.induction.repeat_loss`` on the induction test's tokens without and with ``heads``
    knocked out (``result`` is ``ui.results.inductions``' of its length and ``seed``), once per process; None where the
    model is not a causal LM or its heads cannot be taken apart."""
    name = current_model_name()
    if not has_language_model(name) or language_model_of(name).kind != "next":
        return None
    try:
        return results.repeat_losses(name, (), result.length, seed, tuple(heads))
    except UnsupportedArchitecture:
        return None


def induction_knockout(model, heads) -> None:
    """Does it matter? on a causal LM: the chosen heads knocked out on the induction test's repeated random tokens
    (Head statistics' defaults), measured on each copy; and a button that chooses the strongest induction heads."""
    name = current_model_name()
    if not has_language_model(name) or language_model_of(name).kind != "next":
        return
    length = min(40, (model.max_tokens - 1) // 2)  # two copies and a BOS token within the model's window
    try:
        result = results.inductions(name, (), length, 0)
    except UserFacingError:
        return
    strongest = " ".join(head_code(l, h, model.num_layers, model.num_heads) for l, h in strongest_induction_heads(result))
    st.button(f"Choose the {KNOCKED_OUT} strongest induction heads ({strongest})", key="effects-induction-heads",
              on_click=set_option, args=("heads", strongest), icon=":material/repeat:")
    losses = repeat_losses(result, heads, 0) if heads else None
    if losses is None:
        return
    st.markdown(markdown_safe(induction_knockout_sentence(result, heads, *losses)))


def knockout_sentence(result, seed: int) -> None:
    """The loss on each copy, and on the second with the strongest induction heads knocked out (measured)."""
    heads = strongest_induction_heads(result)
    losses = repeat_losses(result, heads, seed)
    if losses is None:
        return
    plain, knocked = losses
    names = ", ".join(head_code(layer, head, *result.scores.shape) for layer, head in heads)
    st.markdown(markdown_safe(knockout_text(plain, knocked, names, len(heads))))


def knockout_text(plain, knocked, names: str, count: int) -> str:
    """The knock-out sentence from the losses (``.first``, ``.second``: nats per token on each copy) without and with
    the ``count`` heads ``names`` knocked out; a change within ``LOSS_MARGIN`` is "about the same"."""
    change = knocked.second - plain.second
    verb = ("rises" if change > LOSS_MARGIN else "falls" if change < -LOSS_MARGIN
            else f"stays about the same (within {LOSS_MARGIN:.2f} nats)")
    return (f"The model's loss is {fixed(plain.first)} nats per token on the first copy and {fixed(plain.second)} on "
            f"the second. With the {count} strongest induction heads ({names}) knocked out, the second copy's loss "
            f"{verb}: {fixed(knocked.second)} nats (first copy {fixed(knocked.first)}).")
