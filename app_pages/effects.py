"""Does it matter? Knock heads out, rank every head by its effect, attribute the output to tokens, look through the logit lens."""

from functools import partial

import pandas as pd
import streamlit as st

from core.attention_heads.attention import head_attention
from core.causal.effects import EffectsError, check_supported, parse_head_codes, target_token_id
from core.causal.effects_compare import (
    attention_to_token,
    attribution_correlations,
    correlation_sentence,
    default_token,
    importance_summary,
    rank_correlation,
)
from core.causal.token_attribution import (
    GAP_THRESHOLD,
    MAX_REFINED_EVALUATIONS,
    PANEL_NODES,
    REFINED_STEPS_FACTOR,
    rollout_to_tokens,
    unconverged_sentence,
)
from core.maths.numbers import percent
from core.model.layers import example_head_codes, head_code
from core.model.recording import UnsupportedArchitecture
from core.model.tokens import token_labels
from core.outputs.lens import lens_position, lens_summary
from core.teaching.examples import BANK_RIVER
from ui import results
from ui.ablation import METHOD_NAMES, head_label, remember_knockout
from ui.effects_page import embedding_knockout, position_label, target_knockout
from ui.errors import friendly_errors
from ui.explain import explain
from ui.figures import show_figure
from ui.lm_views import induction_knockout
from ui.models import has_language_model, language_model_of
from ui.page_state import end_page, option
from ui.progress_text import bar_progress
from ui.seq2seq import stop_unless_one_stack
from ui.session import current_analysis, current_model, current_model_name, current_text, current_token_limit
from viz.common import file_stem, markdown_safe
from viz.compare import attention_heatmap
from viz.effects import attribution_html, lens_grid, rank_by_layer
from viz.head_stats import head_heatmap
from viz.inside import stacked_token_bars
from viz.predictions import visible_spaces

AUTO_IMPORTANCE_WORK = 72 * 64  # heads × tokens computed without asking (the bundled model at 64 tokens)
MAX_HEADS_DRAWN = 4
MAX_LENS_POSITIONS = 48
STEP_CHOICES = [32, 48, 64, 96, 128]


st.title("Does it matter?")
explain(
    "Attention shows where a head *looks*, not whether what it finds changes the output: a high weight does not "
    "mean a token or a head mattered (Jain & Wallace 2019; Wiegreffe & Pinter 2019). This page changes the model "
    "and measures the output: knock heads out, rank every head by its effect, attribute the output to the input "
    "tokens, and (for models with a language-model head) read the prediction at every layer."
)
model = current_model()
stop_unless_one_stack("Knock-outs, attributions and the logit lens are built here for one stack (an encoder or a decoder), "
                      "so this page does not apply.")
try:
    check_supported(model)
except UnsupportedArchitecture as err:
    st.info(str(err), icon=":material/info:")
    end_page()
name, text = current_model_name(), current_text()
limit = current_token_limit()  # this page's own limit (ui.page_limits), said above the page when it cuts the text
analysis = current_analysis()
labels = token_labels(analysis)
with st.spinner(f"Looking for the language-model head of {name}…"):
    has_head = has_language_model(name)
language_model = language_model_of(name) if has_head else None

# --- what is measured ---------------------------------------------------------------------------
measure, target = "embedding", None
if has_head:
    kind = language_model.kind
    predicted = "the masked word" if kind == "masked" else "the next token after the text"
    choice = option(st.radio, "What to measure", ["prediction", "sentence embedding"], key="measure",
                    horizontal=True, help=f"The prediction: the log-probability of a target token as {predicted}.")
    measure = "target" if choice == "prediction" else "embedding"
    mask = model.tokenizer.mask_token
    if measure == "target" and kind == "masked" and model.tokenizer.mask_token_id not in analysis.input_ids:
        st.info(f"The text has no {markdown_safe(mask)}, so there is no masked word to predict: this page measures the "
                f"sentence embedding. Put {markdown_safe(mask)} where a word should be, for example: "
                f"{markdown_safe(BANK_RIVER.replace('bank', mask))}", icon=":material/info:")
        measure = "embedding"
    if measure == "target":
        typed = option(st.text_input, "Target token (empty: the model's own top prediction)", key="target",
                       max_chars=100, help="One token of the vocabulary; for GPT-2 a word usually starts with a space.")
        target = typed if typed.strip() else None
        try:
            if target is not None:
                target_token_id(model.tokenizer, target, language_model.model.config.vocab_size)
        except EffectsError as err:
            st.warning(f"{markdown_safe(err)} Meanwhile the target is the model's own top prediction.",
                       icon=":material/warning:")
            target = None
else:
    st.info(f"{markdown_safe(model.name)} has no language-model head, so it predicts no words: parts 1–3 measure its "
            "sentence embedding (the mean of the last hidden state over the tokens, the model's own pooling), and part 4, "
            "the logit lens, is not available for it.", icon=":material/info:")
if measure == "embedding":
    explain("Measure: the sentence embedding (mean of the last hidden state over all tokens). A knock-out's effect is "
            "1 − cosine between the original and the ablated embedding (0 = unchanged).", caption=True)
else:
    explain("Measure: the log-probability the model gives the target token. A knock-out's effect is the drop in "
            "log-probability (positive = the target became less likely).", caption=True)
effect_name = "1 − cosine" if measure == "embedding" else "drop in log p(target)"
effect_column = "one_minus_cosine" if measure == "embedding" else "drop_in_log_p_target"  # the CSV's name for it

# --- 1. knock out heads -----------------------------------------------------------------------------
st.header("1. Knock out heads")
explain("Remove heads and run the text again. **Zero** ablation sets the head's output to 0 before the attention "
        "output projection (its shared bias stays); **mean** ablation replaces the head's output at every token "
        "by its mean over the text's tokens, so only what differs between tokens is removed.")
left, right = st.columns([3, 1])
typed_heads = option(left.text_input, "Heads to knock out (L = layer, H = head, both counted from 0)", key="heads",
                     max_chars=2_000, placeholder=f"for example: {example_head_codes(model.num_layers, model.num_heads)}",
                     help=f"Any of L0H0 … L{model.num_layers - 1}H{model.num_heads - 1}, separated by spaces or commas.")
method = option(right.radio, "Ablation", ["zero", "mean"], key="ablation")
heads, unknown = parse_head_codes(typed_heads, model.num_layers, model.num_heads)
if unknown:
    st.warning(f"Not a head of this model: {markdown_safe(', '.join(unknown[:5]))}. Heads are written "
               f"{head_code(0, 0, model.num_layers, model.num_heads)} ({head_label(0, 0)}), "
               f"from L0H0 to L{model.num_layers - 1}H{model.num_heads - 1}.", icon=":material/warning:")
remember_knockout(name, heads, method)
if not heads:
    st.info("Choose one or more heads above to see what knocking them out changes. The importance map below shows "
            "which single heads change the most.", icon=":material/touch_app:")
else:
    st.caption("The attention of the chosen heads in the original run (knocking a head out does not change its own "
               "attention, only what it passes on):")
    for column, (layer, head) in zip(st.columns(min(len(heads), MAX_HEADS_DRAWN)), heads[:MAX_HEADS_DRAWN]):
        with column:
            show_figure(attention_heatmap(head_attention(model, analysis, layer, head), labels, title=head_label(layer, head)),
                        name=file_stem(name, "attention", layer, head), key=f"effects-attention-{layer}-{head}",
                        share=1 / min(len(heads), MAX_HEADS_DRAWN))
    if len(heads) > MAX_HEADS_DRAWN:
        st.caption(f"The first {MAX_HEADS_DRAWN} chosen heads are drawn.")
    with friendly_errors("knocking out heads"), st.spinner("Running the text with those heads knocked out…"):
        if measure == "target":
            target_knockout(name, text, target, limit, (heads, method))
        else:
            embedding_knockout(name, text, analysis, limit, (heads, method))
    st.caption("The attention, maxima and compare pages offer an **Ablated run** toggle for these heads.")
induction_knockout(model, heads)  # a causal language model only

# --- 2. importance map ----------------------------------------------------------------------------
st.header("2. Which heads matter, and do they attend to the token?")
explain(f"Each of the {model.num_layers * model.num_heads} heads knocked out alone ({METHOD_NAMES[method]}), "
        "one after the other, several ablated copies of the text per forward pass. Beside it: how much attention "
        "each head gives one token, averaged over the (non-special) queries.")
work = model.num_layers * model.num_heads * analysis.num_tokens
request_key = (name, text, limit, measure, method, target)
if work > AUTO_IMPORTANCE_WORK and st.session_state.get("importance_requested") != request_key:
    st.info(f"This needs {model.num_layers * model.num_heads} runs of {analysis.num_tokens} tokens.", icon=":material/timer:")
    if st.button("Compute the importance map", icon=":material/play_arrow:"):
        st.session_state["importance_requested"] = request_key
        st.rerun()
else:
    with friendly_errors("computing the importance map"):
        bar = st.progress(0.0, text="Knocking out every head in turn…")
        importance = results.head_importances(name, text, measure, method, target, max_tokens=limit,
                                              progress=bar_progress(bar, "Knocked out {done} of {total} heads…"))
        bar.empty()
        token = option(st.selectbox, "Token the heads attend to", range(analysis.num_tokens), key="token",
                       index=default_token(labels, analysis.special_mask),
                       format_func=partial(position_label, labels))
        attention = attention_to_token(analysis, token)
        left, right = st.columns(2)
        cells = [{"layer": layer, "head": head, effect_column: float(importance[layer, head]),
                  "attention_to_token": float(attention[layer, head])}
                 for layer in range(model.num_layers) for head in range(model.num_heads)]
        with left:
            show_figure(head_heatmap(importance, title=f"Effect of knocking out each head ({effect_name})",
                                     colorbar=effect_name), name=file_stem(name, "head-importance", method),
                        data=pd.DataFrame(cells), key="effects-importance", share=0.5)
        with right:
            show_figure(head_heatmap(attention, title=f"Attention to “{labels[token]}”", colorbar="attention", share=True),
                        name=file_stem(name, "attention-to-token", token), key="effects-attention-to-token", share=0.5)
        st.markdown(correlation_sentence(rank_correlation(importance, attention),
                                         f"a head's effect and its attention to “{markdown_safe(labels[token])}”"))
        summary = importance_summary(importance)
        top = ", ".join(f"{head_label(layer, head)} ({effect:.3g})" for layer, head, effect in summary.top)
        st.caption(f"Largest effects: {top}. Median over all heads: {summary.median:.3g}.")

# --- 3. token attribution ---------------------------------------------------------------------------
st.header("3. Which input tokens does the output depend on?")
explain("**Integrated gradients** (Sundararajan et al. 2017) accumulate the gradient along a straight path from a "
        "baseline (the padding token's embedding at every non-special position) to the real input; taken at enough "
        "points, the scores add up to the change in the measure (completeness, checked below). The path is cut into "
        f"panels of {PANEL_NODES} Gauss–Legendre points, and where a panel's gradients do not add up to the measure's "
        f"change across it the panel is halved, up to {REFINED_STEPS_FACTOR}× the steps chosen (at most "
        f"{MAX_REFINED_EVALUATIONS} gradients): a language model's output can jump within a small stretch of the path, "
        "where evenly spaced points miss it. **Gradient × input** is the one-step shortcut. **Attention rollout** "
        "(Abnar & Zuidema 2020) is how much each token reaches the output through attention alone.")
steps = option(st.select_slider, "Integration steps", STEP_CHOICES, value=32, key="steps",
               help="Points of the path where the gradient is taken at first (Gauss–Legendre quadrature); more "
                    "where the scores do not add up.")
with friendly_errors("attributing the output to tokens"):
    steps_bar = st.progress(0.0, text="Integrated gradients: taking the gradient along the path…")
    integrated = results.attributions(name, text, "integrated_gradients", measure, steps, target, max_tokens=limit,
                                      progress=bar_progress(steps_bar,
                                                            "Integrated gradients: {done} of up to {total} gradients…"))
    with st.spinner("Computing gradient × input…"):
        simple = results.attributions(name, text, "gradient_x_input", measure, steps, target, max_tokens=limit)
    steps_bar.empty()
    flow = rollout_to_tokens(results.rollouts(name, text, max_tokens=limit), integrated)
    if not integrated.converged:
        st.warning(unconverged_sentence(integrated, integrated.steps < max(STEP_CHOICES)), icon=":material/warning:")
    if integrated.first_token_kept:
        st.caption(f"The baseline keeps the first token, “{markdown_safe(labels[0])}”, so it gets no score: in a decoder "
                   "every head can see it and parks spare attention there (an attention sink), and changing it makes "
                   "the output jump along the path.")
    st.html(attribution_html(labels, integrated.scores))
    difference = integrated.output - integrated.baseline_output
    c1, c2, c3 = st.columns(3)
    c1.metric("Sum of the attributions", f"{integrated.total:.4f}")
    c2.metric("Measure: input − baseline", f"{difference:.4f}",
              help=f"{integrated.output:.4f} at the input, {integrated.baseline_output:.4f} at the baseline.")
    c3.metric("Completeness gap", percent(integrated.completeness_gap, 2),
              help=f"|sum − difference| / |difference| after {integrated.evaluations} gradients: 0 with infinitely many "
                   f"steps; up to {GAP_THRESHOLD:.0%} the scores add up.")
    show_figure(
        stacked_token_bars([("integrated gradients", integrated.scores, None), ("gradient × input", simple.scores, None),
                            ("attention rollout", flow, None)], labels, title="Per token: attributions and rollout"),
        name=file_stem(name, "attribution", measure),
        data=pd.DataFrame({"position": range(len(labels)), "token": labels, "integrated_gradients": integrated.scores,
                           "gradient_x_input": simple.scores, "attention_rollout": flow}),
        key="effects-attribution",
    )
    correlations = attribution_correlations(integrated, simple, flow)
    if not integrated.converged:
        st.caption("No rank correlation of integrated gradients is computed: scores that do not add up to the change "
                   "they share out are not yet the integral, and their order can change with more points.")
    elif correlations is not None:
        with_rollout, with_gradient = correlations
        st.markdown(correlation_sentence(with_rollout, "|integrated gradients| and attention rollout over the "
                                         "non-special tokens" + (" but the first" if integrated.first_token_kept else "")))
        st.caption(correlation_sentence(with_gradient, "|integrated gradients| and |gradient × input| (two gradient "
                                        "methods, for reference)"))
    else:
        st.caption("Rank correlations need at least three non-special tokens.")

# --- 4. logit lens ------------------------------------------------------------------------------------------
st.header("4. Logit lens: what would the model predict after each layer?")
if not has_head:
    st.info(f"{markdown_safe(model.name)} has no language-model head, so there is nothing to look through: the logit "
            "lens applies the model's own head to every hidden state.", icon=":material/info:")
    end_page()
explain("The model's own language-model head applied to every hidden state (GPT-2: after its final LayerNorm "
        "`ln_f`; BERT-style masked LMs: through the MLM transform). The last row is the model's real output. "
        + ("A masked LM predicts every position, also the visible ones, where it mostly repeats the token."
           if language_model.kind == "masked" else "Row by row, column t is the guess for the token after t."))
with friendly_errors("computing the logit lens"), st.spinner("Applying the head to every layer…"):
    lens = results.logit_lenses(name, text, 5, 0, max_tokens=limit)
    shown = slice(0, MAX_LENS_POSITIONS)
    show_figure(
        lens_grid(labels[shown], [[candidates[0] for candidates in layer[shown]] for layer in lens.candidates],
                  lens.probs[:, shown, 0], title="Top token at every hidden state and position"),
        name=file_stem(name, "logit-lens"),
        data=pd.DataFrame([{"hidden_state": layer, "position": t, "token": labels[t], "rank": r + 1,
                            "candidate": lens.candidates[layer][t][r], "probability": float(lens.probs[layer, t, r])}
                           for layer in range(lens.probs.shape[0]) for t in range(lens.probs.shape[1])
                           for r in range(lens.probs.shape[2])]),
        key="effects-lens",
    )
    if analysis.num_tokens > MAX_LENS_POSITIONS:
        st.caption(f"The first {MAX_LENS_POSITIONS} positions are drawn; the CSV has them all.")
    position = option(st.selectbox, "Position", range(analysis.num_tokens), key="position",
                      index=lens_position(analysis, language_model.kind, model.tokenizer.mask_token_id),
                      format_func=partial(position_label, labels))
    final = lens.candidates[-1][position][0]
    ranks = lens.final_ranks[:, position]
    summary = lens_summary(lens.final_ranks[:, [position]])
    first_top, settled = int(summary.first_top[0]), int(summary.settled[0])
    show_figure(rank_by_layer(ranks, title=f"Rank of the final prediction “{visible_spaces(final)}” at position {position}"),
                name=file_stem(name, "lens-rank", position),
                data=pd.DataFrame({"hidden_state": range(len(ranks)), "rank": ranks + 1}), key="effects-lens-rank")
    st.caption(f"“{markdown_safe(visible_spaces(final))}” is the top token from hidden state {first_top} on"
               + (" (and stays there)." if first_top == settled else ", though not at every later one."))
