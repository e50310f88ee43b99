"""Inside one head: query, keys, scores, softmax and output, recomputed from the model's own weights."""

from functools import partial

import numpy as np
import pandas as pd
import streamlit as st

from core.heads import UnsupportedArchitecture, architecture, compute_head, embeddings_description
from core.layers import BLOCK_SELECT_HELP, BLOCK_SELECT_LABEL
from core.recorded_heads import norm_before_attention
from core.tokens import token_labels
from ui.caveats import attention_caveat
from ui.errors import friendly_fragment
from ui.explain import beside
from ui.explain import explain as explain_text
from ui.figures import main_column_width, show_figure
from ui.page_state import end_page, option
from ui.session import current_analysis, current_model, presentation_mode
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
if model.is_encoder_decoder:
    from ui.seq2seq_views import inside_page

    inside_page()
    end_page()
try:
    arch = architecture(model)  # decided by config.model_type: refuses look-alikes such as MegatronBERT, RoFormer
except UnsupportedArchitecture as err:
    st.info(str(err), icon=":material/info:")
    end_page()
analysis = current_analysis()

@friendly_fragment
def one_head_step_by_step(model, analysis, arch) -> None:
    """Layer, head and query token pickers and every step they change: a pick reruns only this part."""
    labels = token_labels(analysis)
    t = analysis.num_tokens
    left, middle, right = st.columns(3)
    layer = option(left.selectbox, BLOCK_SELECT_LABEL, range(model.num_layers), key="layer", help=BLOCK_SELECT_HELP)
    head = option(middle.selectbox, "Head (counted from 0)", range(model.num_heads), key="head")
    first_word = next((i for i in range(t) if not analysis.special_mask[i]), 0)
    # the URL and the session keep the token's index (clamped to a new text), the box shows its label
    query = option(right.selectbox, "Query token", range(t), index=first_word, key="query",
                   format_func=lambda i: f"{i}: {labels[i]}")
    step = compute_head(model, analysis, layer, head)
    d = step.queries.shape[1]
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
        show_figure(fig, name=file_stem(model.name, f"layer{layer}", f"head{head}", f"query{query}", what), data=data,
                    key=f"inside-{what}", share=3 / 5 if side_by_side else 1,
                    column_gap="large")  # beside([2, 3]): side by side on the page, stacked on a slide

    def per_token(matrix: np.ndarray, prefix: str) -> pd.DataFrame:
        return pd.DataFrame({"position": range(t), "token": labels} | {f"{prefix}{c}": matrix[:, c] for c in range(d)})

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

    size = f"{d} numbers ({model.hidden_size} ÷ {model.num_heads} heads)" if d * model.num_heads == model.hidden_size \
        else f"{d} numbers (this model's head size)"
    _, figures = explain("2 · The query vector", f"The query of {who_md} is `q = x·W_Q + b_Q`: its input vector times "
                         f"this head's slice of the query projection, {size}.")
    with figures:
        show(component_bars(step.queries[query], title=f"Query vector of {who}", y_title="q"), "query",
             pd.DataFrame({"component": range(d), "query": step.queries[query]}))
    if step.queries_before_rotary is not None:
        moved = int(np.sum(~np.isclose(step.queries_before_rotary[-1], step.queries[-1])))
        _, figures = explain(
            "2b · The rotation (rotary position embedding)",
            "This model adds no position vector to its tokens. Instead, before the scores are computed, every query "
            "and key is rotated: pairs of components are turned by an angle proportional to the token's position. "
            f"A rotated query·key product then depends on how far apart the two tokens are. Token 0 is not turned; "
            f"at the last position {moved} of the {d} components changed. The query shown in step 2 is after this "
            "rotation.",
        )
        with figures:
            show(rotation_bars(step.queries_before_rotary[query], step.queries[query],
                               title=f"Query of {who} before and after the rotation"), "rotation",
                 pd.DataFrame({"component": range(d), "before": step.queries_before_rotary[query], "after": step.queries[query]}))

    shared = ""
    if step.kv_head is not None and len(step.shared_with) > 1:
        others = ", ".join(str(h) for h in step.shared_with if h != head)
        shared = (f" This model has fewer key/value heads than query heads (grouped-query attention): query head {head} "
                  f"reads key/value head {step.kv_head}, and so do query heads {others}. They share these keys and the "
                  "values of step 5; only their queries differ.")
    _, figures = explain("3 · Every key vector", "Every token j gets a key `k_j = x_j·W_K + b_K` (one row each): what "
                         "a query is matched against." + (" Keys are rotated like queries." if step.keys_before_rotary
                                                           is not None else "") + shared)
    with figures:
        show(matrix_heatmap(step.keys, labels, title="Key vectors (one row per token)", colorbar="k", row_title="token",
                            symmetric=True), "keys", per_token(step.keys, "k"))

    kept = step.keep_mask[query]
    scale = f"1/√{d}" if np.isclose(step.scale, d**-0.5) else f"this model's configured scale (not 1/√{d})"
    text_side, figures = explain(
        "4 · Scores, scaled scores, weights",
        f"The score of key j is the dot product `q·k_j`. It is multiplied by {step.scale:.4f} ({scale}), which keeps "
        "the spread of the scores from growing with d. The softmax turns the scaled scores into weights that are "
        "positive and sum to 1."
        + (" This is a decoder: a token may look only at itself and earlier tokens, so later tokens get −∞ before the "
           "softmax (the causal mask) and exactly 0 weight after it." if analysis.is_decoder else "")
        + (f" This layer also has a sliding window of {step.sliding_window} tokens: a token sees only itself and the "
           f"{step.sliding_window - 1} tokens before it; older tokens are masked the same way." if step.sliding_window
           and not step.keep_mask[np.tril_indices(t)].all() else "")
        + (f" Before the mask, the scaled scores are soft-capped: {step.softcap:g}·tanh(score / {step.softcap:g}), "
           f"so none goes beyond ±{step.softcap:g}; the 'scaled' column is after the cap." if step.softcap else ""),
    )
    table = pd.DataFrame({"position": range(t), "key token": labels, "q·k": step.scores[query],
                          "scaled": step.scaled[query], "weight": step.weights[query], "visible": kept})
    text_side.dataframe(table, hide_index=True, height=min(400, 38 + 35 * t))
    with figures:
        rows = [("q·k", step.scores[query], None), ("scaled", step.scaled[query], kept), ("weight", step.weights[query], kept)]
        show(stacked_token_bars(rows, labels, title=f"From scores to weights for {who}"), "scores", table)

    _, figures = explain(
        "5 · The output: weights × values",
        f"Each token j has a value `v_j = x_j·W_V + b_V`. The head's output for {who_md} is `Σ_j weight_j · v_j`, "
        f"{d} numbers. The outputs of all {model.num_heads} heads are concatenated, multiplied by the output projection "
        f"`W_O` (plus its bias) and added to hidden state {layer} (the residual connection)."
        + (" LayerNorm then follows (post-LN)." if not arch.pre_ln else ""),
    )
    with figures:
        show(matrix_heatmap(step.values, labels, title="Value vectors (one row per token)", colorbar="v",
                            row_title="token", symmetric=True), "values", per_token(step.values, "v"))
        show(component_bars(step.outputs[query], title=f"Output of this head for {who}", y_title="Σ weight·v"),
             "output", pd.DataFrame({"component": range(d), "output": step.outputs[query]}))

    difference = float(np.abs(step.weights - analysis.attentions[layer, head]).max())
    text_side, figures = explain("6 · The whole head, checked", "Every row recomputed as above, compared with the "
                                 "attention the model itself returned.")
    text_side.metric("Largest difference from the model's own attention", f"{difference:.1e}")
    if difference < 1e-5:
        text_side.success("The step-by-step computation reproduces the model's attention.")
    else:
        text_side.warning("The recomputation differs from the model's attention by more than 1e-5.")
    matrix = partial(pd.DataFrame, {"query": np.repeat(labels, t), "key": labels * t, "recomputed": step.weights.ravel(),
                           "model": analysis.attentions[layer, head].ravel(), "scaled": step.scaled.ravel(),
                           "visible": step.keep_mask.ravel()})  # the CSV is built only when downloaded
    with figures:
        show(matrix_heatmap(step.weights, labels, column_labels=labels, title="Recomputed attention weights",
                            colorbar="weight", zmin=0.0, zmax=1.0), "matrix", matrix)
        if analysis.is_decoder:
            show(matrix_heatmap(np.where(step.keep_mask, step.scaled, np.nan), labels, column_labels=labels,
                                title="Scaled scores after the " + ("causal and sliding-window" if not
                                      step.keep_mask[np.tril_indices(t)].all() else "causal") + " mask (blank = −∞)",
                                colorbar="scaled"),
                 "masked-scores", matrix)

one_head_step_by_step(model, analysis, arch)
