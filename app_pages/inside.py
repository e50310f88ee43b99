"""Inside one head: query, keys, scores, softmax and output, recomputed from the model's own weights; for an
encoder-decoder, a head of the stack the user picks (encoder, decoder or cross-attention)."""

from functools import partial

import pandas as pd
import streamlit as st

from core.attention_heads.head_checks import (
    REPRODUCED_WITHIN,
    first_word,
    head_facts,
    largest_difference,
    masked_scores,
    per_token_table,
    scores_table,
    weights_table,
)
from core.attention_heads.head_parts import norm_before_attention
from core.attention_heads.inside_head import architecture, compute_head, embeddings_description
from core.attention_heads.inside_pair_head import compute_pair_head, family
from core.model.attention_layers import SINGLE_STACK
from core.model.layers import BLOCK_SELECT_HELP, BLOCK_SELECT_LABEL
from core.model.recording import UnsupportedArchitecture
from core.model.tokens import token_labels
from ui.caveats import attention_caveat
from ui.errors import friendly_fragment
from ui.explain import beside
from ui.explain import explain as explain_text
from ui.figures import main_column_width, show_figure
from ui.page_state import end_page, option
from ui.seq2seq import axis_titles, choose_stack, current_pair, current_stacks
from ui.seq2seq_views import READS
from ui.session import current_model, presentation_mode
from viz.common import file_stem, markdown_safe
from viz.inside import component_bars, matrix_heatmap, rotation_bars, stacked_token_bars

INSIDE_SIDE_BY_SIDE_PX = 780

st.title("Inside one head")
explain_text(
    "One attention head, step by step, computed here from the model's own weights and the actual input "
    "to its layer: each token's query is compared with every token's key, the scores become weights "
    "through a softmax, and the head's output is the weighted sum of the value vectors."
)
attention_caveat()
model = current_model()
stack = choose_stack(current_stacks())  # an encoder-decoder's encoder, decoder or cross stack; a model's one stack
try:  # decided by config.model_type: refuses look-alikes such as MegatronBERT, RoFormer
    arch = architecture(model) if stack.kind == SINGLE_STACK else family(model)
except UnsupportedArchitecture as err:
    st.info(str(err), icon=":material/info:")
    end_page()


@friendly_fragment
def one_head_step_by_step(model, stack, arch) -> None:
    """Layer, head and query token pickers and every step they change: a pick reruns only this part. ``arch``: the
    one-stack model's ``core.attention_heads.inside_head.architecture``, or an encoder-decoder's family ("t5" or "bart")."""
    one_stack = stack.kind == SINGLE_STACK
    analysis = stack.queries  # the rows; stack.keys the columns (the source, for cross-attention)
    labels, key_labels = token_labels(analysis), token_labels(stack.keys)
    t, s = analysis.num_tokens, stack.keys.num_tokens
    heads = stack.num_heads
    left, middle, right = st.columns(3)
    layer = option(left.selectbox, BLOCK_SELECT_LABEL, range(stack.num_layers), key="layer", help=BLOCK_SELECT_HELP)
    head = option(middle.selectbox, "Head (counted from 0)", range(heads), key="head")
    # the URL and the session keep the token's index (clamped to a new text), the box shows its label
    query = option(right.selectbox, "Query token", range(t), index=first_word(analysis.special_mask), key="query",
                   format_func=lambda i: f"{i}: {labels[i]}")
    step = (compute_head(model, analysis, layer, head) if one_stack
            else compute_pair_head(model, current_pair(), stack.kind, layer, head))
    facts = head_facts(step)
    d = facts.head_size
    who = f"“{labels[query]}” (token {query})"  # for figure titles (escaped there); who_md for markdown
    who_md = f"“{markdown_safe(labels[query])}” (token {query})"

    # Text and figures side by side only in a main column that gives the text two fifths of at least 780 px: in a
    # 1024-pixel window with the sidebar open the headings broke word by word and the q·k table was cut at the right.
    side_by_side = not presentation_mode() and main_column_width() >= INSIDE_SIDE_BY_SIDE_PX

    def explain(title: str, text: str):
        """A step: its title and explanation on the left; returns the right-hand column for its figures (one under
        the other in a main column too narrow for both)."""
        text_side, figure_side = beside([2, 3]) if side_by_side else (st.container(), st.container())
        text_side.header(title)
        with text_side:
            explain_text(text)
        return text_side, figure_side

    def show(fig, what: str, data) -> None:
        show_figure(fig, name=file_stem(model.name, *(() if one_stack else (stack.kind,)), f"layer{layer}", f"head{head}",
                                       f"query{query}", what), data=data,
                    key=f"inside-{what}", share=3 / 5 if side_by_side else 1,
                    column_gap="large")  # beside([2, 3]): side by side on the page, stacked on a slide

    if one_stack:
        reads = f"the embedding layer's output ({embeddings_description(model)})" if layer == 0 else f"the output of layer {layer - 1}"
        recorded = arch.kind == "recorded"
        explain("1 · What the head reads", f"Layer {layer} reads hidden state {layer}, {reads}: one vector of "
            f"{model.hidden_size} numbers per token. " + (
                (f"This model ({model.model_type}) normalises first: the block applies its pre-attention norm "
                 "(`input_layernorm`) to the hidden state, so the head reads `input_layernorm(hidden state)`, and "
                 "this page shows that input as the model computed it." if norm_before_attention(model, layer) else
                 "This page shows what the attention module read, recorded from the model itself.") if recorded else
                f"This model ({model.model_type}) is pre-LN: the block applies its LayerNorm `ln_1` to the hidden state before attention, "
                "so the head reads `ln_1(hidden state)`." if arch.pre_ln else
                f"This model ({model.model_type}) is post-LN: LayerNorm (not batch norm: each token is normalised on its own) comes after "
                "attention and after the feed-forward part, so the head reads the hidden state as it is."))
    else:
        ln = (" T5 applies an RMS LayerNorm before each attention (pre-LN), so the head reads the normalised vectors."
              if arch == "t5" else "")
        explain("1 · What the head reads", f"The {stack.label.lower()} head reads {READS[stack.kind].format(layer=layer)}.{ln}")

    size = f"{d} numbers ({model.hidden_size} ÷ {heads} heads)" if d * heads == model.hidden_size \
        else f"{d} numbers (this model's head size)"
    _, figures = explain("2 · The query vector", f"The query of {who_md} is `q = x·W_Q + b_Q`: its input vector times "
                         f"this head's slice of the query projection, {size}.")
    with figures:
        show(component_bars(step.queries[query], title=f"Query vector of {who}", y_title="q"), "query",
             pd.DataFrame({"component": range(d), "query": step.queries[query]}))
    if facts.rotated_components is not None:  # one-stack models with rotary positions
        _, figures = explain(
            "2b · The rotation (rotary position embedding)",
            "This model adds no position vector to its tokens. Instead, before the scores are computed, every query "
            "and key is rotated: pairs of components are turned by an angle proportional to the token's position. "
            f"A rotated query·key product then depends on how far apart the two tokens are. Token 0 is not turned; "
            f"at the last position {facts.rotated_components} of the {d} components changed. The query shown in step 2 is after this "
            "rotation.",
        )
        with figures:
            show(rotation_bars(step.queries_before_rotary[query], step.queries[query],
                               title=f"Query of {who} before and after the rotation"), "rotation",
                 pd.DataFrame({"component": range(d), "before": step.queries_before_rotary[query], "after": step.queries[query]}))

    shared = ""
    if getattr(step, "kv_head", None) is not None and len(step.shared_with) > 1:
        others = ", ".join(str(h) for h in step.shared_with if h != head)
        shared = (f" This model has fewer key/value heads than query heads (grouped-query attention): query head {head} "
                  f"reads key/value head {step.kv_head}, and so do query heads {others}. They share these keys and the "
                  "values of step 5; only their queries differ.")
    every = f"Every {stack.key_side} token" if stack.key_side else "Every token"
    cross = (" (the encoder's output: the same keys for every decoder layer's cross-attention, through each layer's own "
             "key projection)" if stack.is_cross else "")
    _, figures = explain("3 · Every key vector", f"{every} j gets a key `k_j = x_j·W_K + b_K` (one row each){cross}: what "
                         "a query is matched against." + (" Keys are rotated like queries." if getattr(
                             step, "keys_before_rotary", None) is not None else "") + shared)
    with figures:
        show(matrix_heatmap(step.keys, key_labels, title="Key vectors (one row per token)", colorbar="k",
                            row_title="source token" if stack.is_cross else "token",
                            symmetric=True), "keys", per_token_table(step.keys, key_labels, "k"))

    kept = step.keep_mask[query]
    scale = f"1/√{d}" if facts.standard_scale else f"this model's configured scale (not 1/√{d})"
    window, softcap = getattr(step, "sliding_window", None), getattr(step, "softcap", None)  # one-stack models only
    text_side, figures = explain(
        "4 · Scores, scaled scores, weights",
        f"The score of key j is the dot product `q·k_j`. It is multiplied by {step.scale:.4f} ({scale})"
        + (", which keeps the spread of the scores from growing with d." if facts.standard_scale else ".")
        + (" A learned relative-position bias (one number per distance bucket and head) is then added to each score: "
           "the 'scaled' column includes it." if facts.position_bias else "")
        + " The softmax turns the scaled scores into weights that are positive and sum to 1."
        + (" This is a decoder: a token may look only at itself and earlier tokens, so later tokens get −∞ before the "
           "softmax (the causal mask) and exactly 0 weight after it." if stack.causal else "")
        + (f" This layer also has a sliding window of {window} tokens: a token sees only itself and the "
           f"{window - 1} tokens before it; older tokens are masked the same way." if window and facts.sliding else "")
        + (f" Before the mask, the scaled scores are soft-capped: {softcap:g}·tanh(score / {softcap:g}), "
           f"so none goes beyond ±{softcap:g}; the 'scaled' column is after the cap." if softcap else ""),
    )
    table = scores_table(step, query, key_labels)
    text_side.dataframe(table, hide_index=True, height=min(400, 38 + 35 * s))
    with figures:
        rows = [("q·k", step.scores[query], None), ("scaled", step.scaled[query], kept), ("weight", step.weights[query], kept)]
        show(stacked_token_bars(rows, key_labels, title=f"From scores to weights for {who}"), "scores", table)

    _, figures = explain(
        "5 · The output: weights × values",
        f"{every} j has a value `v_j = x_j·W_V + b_V`. The head's output for {who_md} is `Σ_j weight_j · v_j`, "
        f"{d} numbers. The outputs of all {heads} heads are concatenated, multiplied by the output projection "
        f"`W_O` (plus its bias, where the model has one) and added to the residual stream (the residual connection)."
        + (" LayerNorm then follows (post-LN)." if one_stack and not arch.pre_ln else ""),
    )
    with figures:
        show(matrix_heatmap(step.values, key_labels, title="Value vectors (one row per token)", colorbar="v",
                            row_title="source token" if stack.is_cross else "token", symmetric=True), "values",
             per_token_table(step.values, key_labels, "v"))
        show(component_bars(step.outputs[query], title=f"Output of this head for {who}", y_title="Σ weight·v"),
             "output", pd.DataFrame({"component": range(d), "output": step.outputs[query]}))

    own = stack.weights(layer, [head])[0]  # the attention the model returned, [t, s]
    difference = largest_difference(step, own)
    text_side, figures = explain("6 · The whole head, checked", "Every row recomputed as above, compared with the "
                                 "attention the model itself returned.")
    text_side.metric("Largest difference from the model's own attention", f"{difference:.1e}")
    if difference < REPRODUCED_WITHIN:
        text_side.success("The step-by-step computation reproduces the model's attention.")
    else:
        text_side.warning(f"The recomputation differs from the model's attention by more than {REPRODUCED_WITHIN:.0e}.")
    matrix = partial(weights_table, step, labels, key_labels, own)  # the CSV is built only when downloaded
    rows_title, columns_title = axis_titles(stack)
    with figures:
        show(matrix_heatmap(step.weights, labels, column_labels=key_labels, title="Recomputed attention weights",
                            colorbar="weight", zmin=0.0, zmax=1.0,
                            **({} if one_stack else {"row_title": rows_title, "column_title": columns_title})),
             "matrix", matrix)
        if stack.causal:
            show(matrix_heatmap(masked_scores(step), labels, column_labels=labels,
                                title="Scaled scores after the " + ("causal and sliding-window" if facts.sliding
                                                                    else "causal") + " mask (blank = −∞)",
                                colorbar="scaled"),
                 "masked-scores", matrix)


one_head_step_by_step(model, stack, arch)
