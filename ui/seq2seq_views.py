"""Page bodies for encoder-decoder models (T5, BART, Marian …), called by a page's encoder-decoder branch.

Each reads the model's blocks through one contract, ``core.stacks.AttentionStack`` (``PairAnalysis.stacks``: encoder
self-attention, decoder self-attention and cross-attention; target rows = queries, source columns = keys), so one body
serves the three kinds of blocks. Pages that apply only to a model with one stack call
``ui.seq2seq.stop_unless_one_stack``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from core.attention import attention_maxima, reduce_heads
from core.cross_attention import CROSS_DEFINITIONS, CROSS_STATISTICS, cross_alignment, cross_attention_view, cross_head_statistics
from core.head_stats import DEFINITIONS, STATISTICS, UNIFORM_ENTROPY, analysis_statistics, statistic_grid
from core.heads import UnsupportedArchitecture
from core.seq2seq_heads import compute_pair_head, family
from core.stacks import STACK_LABELS, AttentionStack, stack_of
from core.tokens import token_labels
from ui.cache_seq2seq import cached_pair_view
from ui.figures import show_figure
from ui.page_state import end_page, option
from ui.seq2seq import current_pair, current_target, pair_caption
from ui.session import current_model, current_model_name, current_text, current_token_limit, presentation_mode
from viz import attention as va
from viz import bertviz_offline as bv
from viz.common import COLORBLIND_SAFE, SEQUENTIAL, file_stem, markdown_safe
from viz.cross_attention import alignment_figure, alignment_grid
from viz.head_stats import head_heatmap
from viz.inside import component_bars, matrix_heatmap, stacked_token_bars
from viz.maxima import maxima_grid

PALETTES = {"cividis": COLORBLIND_SAFE, "viridis": SEQUENTIAL}
VIEWS = ["one head", "one layer", "BertViz"]
BERTVIZ = {"head view": "head", "model view": "model"}
STACK_HELP = (
    "Encoder self-attention: source tokens attending to source tokens (every token sees all). Decoder "
    "self-attention: target tokens attending to earlier target tokens (causal). Cross-attention: each target token "
    "(query, from the decoder) attending to the source tokens (keys and values, from the encoder's last layer)."
)


def stack_selector(stacks: tuple[AttentionStack, ...], key: str = "stack") -> AttentionStack:
    """The **Encoder self-attention / Decoder self-attention / Cross-attention** selector (bound to the URL by label)."""
    label = option(st.segmented_control, "Attention", [s.label for s in stacks], key=key, default=STACK_LABELS["cross"],
                   required=True, help=STACK_HELP)
    return next(s for s in stacks if s.label == label)


def axis_titles(stack: AttentionStack) -> tuple[str, str]:
    """(rows, columns) of one head's heatmap: "source token: query (attending)" …; for cross-attention the side that
    asks (the decoder) and the side asked (the encoder)."""
    if stack.is_cross:
        return f"{stack.query_side} token: query (decoder)", f"{stack.key_side} token: key (encoder)"
    return f"{stack.query_side} token: query (attending)", f"{stack.key_side} token: key (attended to)"


def attention_page() -> None:
    """The attention page for an encoder-decoder: overview, one head, one layer, BertViz; for all three attentions."""
    model, pair = current_model(), current_pair()
    present = presentation_mode()
    if not present:
        st.caption(pair_caption(pair))
    stack = stack_selector(pair.stacks)
    c = st.columns(4)
    special = option(c[0].selectbox, "Special tokens", ["show", "hide", "renormalise"], key="special",
                             help="</s>, <pad>, language codes … as each tokenizer marks them, never by position. "
                             "Renormalise: hide them and rescale each row to sum to 1 again.")
    words = option(c[1].toggle, "Word level", key="words",
                        help="Merge word pieces into words: sum over a word's key pieces, mean over its query pieces.")
    per_head = option(c[2].radio, "Colour scale", ["fixed", "per head"], key="scale", horizontal=True) == "per head"
    colorscale = PALETTES[option(c[3].selectbox, "Palette", list(PALETTES), key="palette")]
    if not present:
        st.caption("Raw attention weights. Rollout and norm-weighted attention are computed for encoder-only and "
                   "decoder-only models; for an encoder-decoder the decoder also reads the source through "
                   "cross-attention, which neither method accounts for.")
    name, source, target, limit = current_model_name(), current_text(), current_target(), current_token_limit()
    with st.spinner("Preparing the attention matrices…"):
        view = cached_pair_view(name, source, target, limit, stack.kind, special, words)
    if not view.labels or not view.key_labels:
        st.info("Every token is a special token, so hiding them leaves nothing to show. Choose *show* for special tokens.")
        end_page()
    layers, heads = view.matrices.shape[:2]
    head_names = [f"head {h}" for h in range(heads)]
    keys = view.key_labels if stack.is_cross else None
    style = {"causal": view.causal, "colorscale": colorscale, "per_head_scale": per_head, "large": present}
    what = stack.label.lower()
    show_figure(
        va.overview_figure(view.matrices, title=f"{model.name}: {what}, every layer × head",
                           head_names=[str(h) for h in range(heads)], **style),
        name=file_stem(model.name, stack.kind, "overview"),
        data=va.cells_table(view.matrices, view.labels, causal=view.causal, max_cells=va.OVERVIEW_MAX_CELLS,
                            outer={"layer": list(range(layers)), "head": head_names}, key_labels=keys),
        key="seq2seq-overview",
    )
    if stack.is_cross and not present:
        st.caption("Cross-attention thumbnails are not square: each has a row per target token and a column per source token.")
    left, right, mode = st.columns([1, 1, 3])
    layer = option(left.selectbox, "Layer (counted from 0)", range(layers), key="layer")
    head = option(right.selectbox, "Head (counted from 0)", range(heads), key="head")
    shown = option(mode.segmented_control, "View", VIEWS, key="view", default=VIEWS[0], required=True)
    if shown == "one head":
        matrix = view.matrices[layer, head]
        show_figure(
            va.head_figure(matrix, view.labels, title=f"{model.name} · {what}, layer {layer}, head {head}",
                           key_labels=keys, axis_titles=axis_titles(stack), **style),
            name=file_stem(model.name, stack.kind, "layer", layer, "head", head),
            data=va.matrix_table(matrix, view.labels, causal=view.causal, key_labels=keys),
            key="seq2seq-head",
        )
    elif shown == "one layer":
        show_figure(
            va.layer_grid_figure(view.matrices[layer], view.labels, title=f"{model.name} · {what}, layer {layer}, every head",
                                 head_names=head_names, key_labels=keys, **style),
            name=file_stem(model.name, stack.kind, "layer", layer),
            data=va.cells_table(view.matrices[layer], view.labels, causal=view.causal, max_cells=va.GRID_MAX_CELLS,
                                outer={"head": head_names}, key_labels=keys),
            key="seq2seq-layer",
        )
    else:
        _bertviz(pair.stacks, stack, (name, source, target, limit), special, words, layer)


def _bertviz(stacks: tuple[AttentionStack, ...], stack: AttentionStack, run: tuple[str, str, str, int], special: str,
             words: bool, layer: int) -> None:
    """BertViz's encoder-decoder view of the three ``stacks`` (``run``: model name, source, target, token limit)."""
    kind = BERTVIZ[option(st.radio, "BertViz view", list(BERTVIZ), key="bertviz", horizontal=True)]
    st.caption("BertViz's own encoder-decoder view: its *Attention* menu switches between Encoder, Decoder and Cross "
               "(cross-attention: target tokens on the left, source tokens on the right). BertViz's neuron view "
               "does not take encoder-decoder models.")
    encoder, decoder, cross = (cached_pair_view(*run, part.kind, special, words) for part in stacks)
    if not (encoder.labels and decoder.labels):
        st.info("Hiding special tokens leaves the source or the target empty; choose *show* for special tokens.")
        return
    common = min(encoder.matrices.shape[0], decoder.matrices.shape[0])
    heads = encoder.matrices.shape[1]
    budget = bv.seq2seq_budget(heads, len(encoder.labels), len(decoder.labels))
    sent = bv.layers_near(min(layer, common - 1), common, budget)
    if not sent:
        st.warning(f"BertViz draws one line per query–key pair and head: at {len(encoder.labels)} source and "
                   f"{len(decoder.labels)} target tokens one layer is more than a browser draws smoothly "
                   f"({bv.MAX_WEIGHTS:,} lines). The heatmaps show every weight; for BertViz use shorter texts or word level.")
        return
    if len(sent) < common:
        st.info(f"BertViz gets layers {sent[0]}–{sent[-1]} (around layer {layer}): every layer would be too many lines "
                "for a browser. Pick another layer above to move the window.")
    if encoder.matrices.shape[0] != decoder.matrices.shape[0]:
        st.info(f"The encoder has {encoder.matrices.shape[0]} layers and the decoder {decoder.matrices.shape[0]}; "
                f"BertViz shows the first {common} of each.")
    show = stack.kind.capitalize()  # BertViz's own names: Encoder, Decoder, Cross
    html = bv.seq2seq_view_html(kind, encoder.matrices, decoder.matrices, cross.matrices, encoder.labels, decoder.labels,
                                layers=sent, layer=min(layer, common - 1), show=show)
    n = max(len(encoder.labels), len(decoder.labels))
    st.iframe(html, height=bv.view_height(kind, n, len(sent), heads))


def maxima_page() -> None:
    """The maxima page for an encoder-decoder: per stack; for cross-attention the soft alignment of target to source words."""
    model, pair = current_model(), current_pair()
    st.caption(pair_caption(pair))
    stack = stack_selector(pair.stacks)
    left, right = st.columns(2)
    reduction = option(left.radio, "Heads", ["max over heads", "mean over heads", "one head"], key="heads",
                           horizontal=True)
    head = None
    if reduction == "one head":
        head = option(left.selectbox, "Head (counted from 0)", range(stack.num_heads), key="head")
    heads = head if head is not None else {"max over heads": "max", "mean over heads": "mean"}[reduction]
    include_special = option(right.toggle, "Include special tokens", key="special")
    words = option(right.toggle, "Word level", key="words",
                         help="Sum over a word's key pieces, mean over its query pieces.")
    what = f"head {head}" if head is not None else reduction
    if not stack.is_cross:
        maxima = attention_maxima(stack.queries, heads=heads, skip_special=not include_special, words=words)
        if not len(maxima.queries):
            st.info("Every token of this text is a special token: switch on **Include special tokens** to see them.")
            return
        st.markdown(f"{stack.label}: for every layer and every {stack.query_side} token, the token "
                    "it attends to most. The colour is the distance to it: white = itself, orange = to its left, "
                    "purple = to its right.")
        show_figure(maxima_grid(maxima, title=f"Most-attended token ({stack.label.lower()}, {what})"),
                    name=file_stem(model.name, "maxima", stack.kind, "head", head), data=maxima.long_table(),
                    key="seq2seq-maxima-grid")
        st.dataframe(maxima.wide_table(), hide_index=True)
        return
    alignment = cross_alignment(pair, heads=heads, skip_special=not include_special, words=words)
    if not len(alignment.queries):
        st.info("Every target token is a special token: switch on **Include special tokens** to see them.")
        return
    st.markdown(
        "**Soft alignment.** For every decoder layer and every target token: the source token it attends to most "
        "through cross-attention (heads reduced first). In a trained translation model the middle and upper layers "
        "often line each target word up with the source word it translates; in a random model the picture is noise."
    )
    show_figure(alignment_grid(alignment, title=f"Most-attended source token per target token ({what})"),
                name=file_stem(model.name, "alignment", "head", head), data=alignment.long_table(),
                key="seq2seq-alignment-grid")
    layer = option(st.selectbox, "Decoder layer (counted from 0)", range(stack.num_layers), key="layer")
    view = cross_attention_view(pair, words=words)
    matrix = reduce_heads(view.matrices[layer : layer + 1], heads)[0]
    show_figure(alignment_figure(matrix, view.labels, view.key_labels, alignment, layer,
                                 title=f"Cross-attention, layer {layer} ({what}); rings: most attended"),
                name=file_stem(model.name, "alignment", "layer", layer, "head", head),
                data=va.matrix_table(matrix, view.labels, causal=False, key_labels=view.key_labels),
                key="seq2seq-alignment-matrix")
    table = alignment.wide_table()
    st.dataframe(table, hide_index=True)
    st.download_button("Download the table (CSV)", table.to_csv(index=False).encode("utf-8"),
                       file_name=f"{file_stem(model.name, 'alignment-table', 'head', head)}.csv", mime="text/csv",
                       on_click="ignore", key="seq2seq-alignment-csv", icon=":material/download:")
    st.info("Attention rollout and norm-weighted attention are shown for encoder-only and decoder-only models.",
            icon=":material/info:")


def stats_page() -> None:
    """Head statistics for an encoder-decoder: every statistic for the encoder and decoder stacks; for
    cross-attention the ones that make sense (entropy, distance to the alignment diagonal, share on end tokens)."""
    model, pair = current_model(), current_pair()
    st.caption(pair_caption(pair) + " Statistics are computed for the sidebar's source and target only.")
    stack = stack_selector(pair.stacks)
    if stack.is_cross:
        statistics, definitions = CROSS_STATISTICS, CROSS_DEFINITIONS
        table = cross_head_statistics(pair)
    else:
        statistics, definitions = STATISTICS, DEFINITIONS
        table, _ = analysis_statistics(stack.queries, model.tokenizer)
    statistic = option(st.selectbox, "Statistic", list(statistics), format_func=statistics.get, key="stat")
    if table[statistic].isna().all():
        st.info("There is no query token to average over: type at least one ordinary word (two for the decoder, "
                "whose first token can only attend to itself).")
        return
    share = statistic not in ("entropy", "distance", "diagonal")
    show_figure(
        head_heatmap(statistic_grid(table, statistic), title=f"{statistics[statistic]}: {stack.label.lower()}",
                     colorbar=statistic, share=share),
        name=file_stem(model.name, "head-stats", stack.kind, statistic),
        data=table,
        key="seq2seq-stats",
    )
    note = definitions[statistic]
    if statistic == "entropy":
        note += f" Attention spread evenly would score {table[UNIFORM_ENTROPY].mean():.2f} nats."
    st.caption(note)
    ranked = table.sort_values(statistic, ascending=statistic == "diagonal").head(5)
    order = "lowest" if statistic == "diagonal" else "highest"
    st.markdown(f"**The five heads with the {order} value**")
    st.dataframe(ranked[["layer", "head", statistic]], hide_index=True)


READS = {  # per stack kind
    "encoder": "hidden state {layer} of the encoder (the source tokens)",
    "decoder": "hidden state {layer} of the decoder (the target tokens it read)",
    "cross": "queries: the decoder's hidden state {layer} after this block's self-attention (residual added, LayerNorm "
           "as the model places it); keys and values: the encoder's output, its last hidden state",
}


def inside_page() -> None:
    """Inside one head for an encoder-decoder: encoder, decoder or cross-attention, recomputed from the weights."""
    model = current_model()
    try:
        kind = family(model)
    except UnsupportedArchitecture as err:
        st.info(str(err), icon=":material/info:")
        return
    pair = current_pair()
    st.caption(pair_caption(pair))
    stack = stack_selector(pair.stacks)
    queries_of = stack.queries
    labels, key_labels = token_labels(queries_of), token_labels(stack.keys)
    left, middle, right = st.columns(3)
    layer = option(left.selectbox, "Layer (counted from 0)", range(stack.num_layers), key="layer")
    head = option(middle.selectbox, "Head (counted from 0)", range(stack.num_heads), key="head")
    first_word = next((i for i in range(queries_of.num_tokens) if not queries_of.special_mask[i]), 0)
    query = option(right.selectbox, "Query token", range(queries_of.num_tokens), index=first_word, key="query",
                            format_func=lambda i: f"{i}: {labels[i]}")
    step = compute_pair_head(model, pair, stack.kind, layer, head)
    d = step.queries.shape[1]
    who = f"“{labels[query]}” (token {query})"
    who_md = f"“{markdown_safe(labels[query])}” (token {query})"
    stem = file_stem(model.name, stack.kind, f"layer{layer}", f"head{head}", f"query{query}")
    ln = ("T5 applies an RMS LayerNorm before each attention (pre-LN), so the head reads the normalised vectors."
          if kind == "t5" else "")
    st.markdown(f"**1 · What the head reads.** {READS[stack.kind].format(layer=layer)}. {ln}")
    st.markdown(f"**2 · Query and keys.** The query of {who_md} is its input times this head's slice of the query "
                f"projection ({d} numbers); every {stack.key_side} token gets a key the same way.")
    show_figure(component_bars(step.queries[query], title=f"Query vector of {who}", y_title="q"),
                name=f"{stem}-query", data=pd.DataFrame({"component": range(d), "query": step.queries[query]}),
                key="seq2seq-inside-query")
    show_figure(matrix_heatmap(step.keys, key_labels, title="Key vectors (one row per token)", colorbar="k",
                               row_title="key token", symmetric=True),
                name=f"{stem}-keys", data=pd.DataFrame(step.keys, index=key_labels).reset_index(names="token"),
                key="seq2seq-inside-keys")
    scale_text = ("T5 does not divide by √d; instead a learned relative-position bias (one number per distance bucket "
                  "and head) is added to each self-attention score" if kind == "t5" else
                  f"scores are multiplied by {step.scale:.4f} (1/√{d})")
    if kind == "t5" and stack.is_cross:
        scale_text = "T5 does not divide by √d, and cross-attention has no position bias"
    mask_text = (" The decoder may look only at itself and earlier target tokens: later ones get −∞ before the softmax "
                 "and exactly 0 after it." if stack.causal else "")
    st.markdown(f"**3 · Scores and weights.** The score of key j is `q·k_j`; {scale_text}. The softmax turns the "
                f"result into weights that are positive and sum to 1.{mask_text}")
    kept = step.keep_mask[query]
    table = pd.DataFrame({"position": range(len(key_labels)), "key token": key_labels, "q·k": step.scores[query],
                          "position bias": step.bias[query], "scaled + bias": step.scaled[query],
                          "weight": step.weights[query], "visible": kept})
    st.dataframe(table, hide_index=True, height=min(400, 38 + 35 * len(table)))
    rows = [("q·k", step.scores[query], None), ("scaled + bias", step.scaled[query], kept), ("weight", step.weights[query], kept)]
    show_figure(stacked_token_bars(rows, key_labels, title=f"From scores to weights for {who}"), name=f"{stem}-scores",
                data=table, key="seq2seq-inside-scores")
    st.markdown(f"**4 · The output.** The head's output for {who_md} is `Σ_j weight_j · v_j`, {d} numbers; all heads' "
                "outputs are concatenated, projected and added to the residual stream.")
    show_figure(component_bars(step.outputs[query], title=f"Output of this head for {who}", y_title="Σ weight·v"),
                name=f"{stem}-output", data=pd.DataFrame({"component": range(d), "output": step.outputs[query]}),
                key="seq2seq-inside-output")
    difference = float(np.abs(step.weights - stack.weights(layer, [head])[0]).max())
    st.markdown("**5 · The whole head, checked** against the attention the model itself returned.")
    st.metric("Largest difference from the model's own attention", f"{difference:.1e}")
    if difference < 1e-5:
        st.success("The step-by-step computation reproduces the model's attention.")
    else:
        st.warning("The recomputation differs from the model's attention by more than 1e-5.")
    show_figure(matrix_heatmap(step.weights, labels, column_labels=key_labels, title="Recomputed attention weights",
                               colorbar="weight", zmin=0.0, zmax=1.0, row_title=axis_titles(stack)[0], column_title=axis_titles(stack)[1]),
                name=f"{stem}-matrix", data=va.matrix_table(step.weights, labels, causal=False, key_labels=key_labels),
                key="seq2seq-inside-matrix")



def tokens_page() -> None:
    """The home page's "what the model saw" for an encoder-decoder: the source's and the decoder's tokens."""
    model, pair = current_model(), current_pair()
    st.caption(
        f"{model.name}: an encoder-decoder, {pair.source.num_layers} encoder and {pair.num_decoder_layers} decoder layers × "
        f"{pair.source.num_heads} heads, hidden size {model.hidden_size}. " + pair_caption(pair)
    )
    for stack in (stack_of(pair, "encoder"), stack_of(pair, "decoder")):  # the two token sequences
        analysis = stack.queries
        st.markdown(f"**{stack.query_side.capitalize()} ({'decoder input' if stack.causal else 'encoder'})**")
        table = pd.DataFrame({"position": range(analysis.num_tokens), "token": analysis.tokens, "id": analysis.input_ids,
                              "special": analysis.special_mask})
        st.dataframe(table, hide_index=True, height=min(400, 38 + 35 * len(table)))
