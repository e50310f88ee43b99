"""Attention: every head of every layer as heatmaps, one head large, and BertViz's views offline; for an
encoder-decoder, of the stack the user picks (encoder, decoder or cross-attention)."""


import streamlit as st

from core.attention_heads.attention import attention_view, rollout, window_hidden
from core.model.attention_layers import SINGLE_STACK
from core.model.layers import BLOCK_SELECT_HELP, BLOCK_SELECT_LABEL, numbering_caption
from core.model.recording import UnsupportedArchitecture
from core.model.tokens import token_labels
from ui import results
from ui.ablation import knockout, with_ablation
from ui.ahead import work_ahead
from ui.attention_page import long_attention
from ui.caveats import WORD_LEVEL_HELP, attention_caveat, word_level_allowed
from ui.errors import friendly_fragment
from ui.explain import controls, explain
from ui.figures import figure_downloads, show_figure
from ui.head_switch import head_switch
from ui.page_figures import (
    ATTENTION_PALETTES,
    ATTENTION_SOURCES,
    ATTENTION_SPECIAL,
    ATTENTION_VIEWS,
    AttentionFigures,
    head_names_of,
    is_long,
    overview_title,
)
from ui.page_state import end_page, option, unshown_option
from ui.seq2seq import axis_titles, choose_stack, current_run, current_stacks, current_target, not_defined
from ui.seq2seq_views import pair_bertviz
from ui.session import current_model, current_model_name, current_settings, current_text, current_token_limit, presentation_mode
from viz import bertviz_offline as bv

SOURCES, SPECIAL, PALETTES, VIEWS = ATTENTION_SOURCES, ATTENTION_SPECIAL, ATTENTION_PALETTES, ATTENTION_VIEWS
BERTVIZ = {"head view": "head", "model view": "model", "neuron view": "neuron"}

st.title("Attention")
present = presentation_mode()
explain(
    "Each heatmap is one attention head: row *i* shows how much token *i* (the query) takes from each "
    "token (the keys); a row of raw weights sums to 1. " + numbering_caption(current_model().num_layers)
)
attention_caveat()
model = current_model()
stacks = current_stacks()
stack = choose_stack(stacks, caption=not present)  # an encoder-decoder's encoder, decoder or cross stack
one_stack = stack.kind == SINGLE_STACK
c = controls().columns(5)
source = option(c[0].selectbox, "Attention source", list(SOURCES), key="source",
                        help="Norm-weighted: each weight times the length of what the key token's value adds "
                        "(Kobayashi et al. 2020). Rollout: heads averaged with the residual, multiplied through the "
                        "layers (Abnar & Zuidema 2020); it has no separate heads, and it is a heuristic: it assumes "
                        "equal residual and attention weight and ignores values, the feed-forward layers and LayerNorm.")
special = option(c[1].selectbox, "Special tokens", SPECIAL, key="special",
                         help="[CLS], [SEP], <|endoftext|> … as the tokenizer marks them, never by position. Renormalise: hide "
                         "them and rescale each row to sum to 1 again.")
if (why := not_defined(source, stack)) is not None:
    st.caption(f"{SOURCES[source].capitalize()} {why}: showing the {stack.label.lower()}'s raw attention weights.")
    source = "raw"
words = option(c[2].toggle, "Word level", key="words", disabled=not word_level_allowed(source),
               help=WORD_LEVEL_HELP) and word_level_allowed(source)
per_head = option(c[3].radio, "Colour scale", ["fixed", "per head"], key="scale", horizontal=True) == "per head"
colorscale = PALETTES[option(c[4].selectbox, "Palette", list(PALETTES), key="palette",
                                     help="Both are colour-blind safe; cividis is built for it.")]
analysis = stack.queries  # the tokens of the rows: the sidebar's text, or an encoder-decoder's source or target
ablation = None
if one_stack:
    plain = analysis
    [analysis] = with_ablation(analysis)  # heads knocked out on the "Does it matter?" page, if the user turns it on
    ablation = None if analysis is plain else knockout()  # in every view's and figure's cache key
if one_stack and is_long(analysis):  # every head's every cell is too much to draw: screen resolution, zoom and thumbnails
    long_attention(model, analysis, source=source, special=special, words=words, per_head=per_head,
                   colorscale=colorscale, ablation=ablation)
    end_page()
if words and not present:
    st.caption("Word level: a word's row is the **mean** over its query pieces; its column the **sum** over its key pieces.")

name, text, limit = current_model_name(), current_text(), current_token_limit()
try:
    with st.spinner("Preparing the attention matrices…"):
        if one_stack:
            view = results.attention_views(name, text, source, special, words, max_tokens=limit, ablation=ablation)
        elif source == "rollout":  # the encoder's: a stack of one token sequence with residual connections
            view = attention_view(analysis, matrices=rollout(analysis)[:, None], special=special, words=words)
        else:
            view = results.pair_views(name, (text, current_target()), stack.kind, special, words, max_tokens=limit)
except UnsupportedArchitecture as err:
    st.warning(f"{err} Showing raw attention instead.")
    source, view = "raw", results.attention_views(name, text, "raw", special, words, max_tokens=limit, ablation=ablation)
layers, heads = view.matrices.shape[:2]
head_names = head_names_of(source, heads)
style = {"causal": stack.causal, "colorscale": colorscale, "per_head_scale": per_head, "large": present}
# cells a layer's sliding window masked: drawn as masked, never as a head's zero (rollout mixes layers: not masked)
hidden = None if source == "rollout" or not one_stack else window_hidden(view, analysis.sliding_windows)
if hidden is not None and hidden.any():
    windowed = [l for l, w in enumerate(analysis.sliding_windows) if w is not None]
    sizes = sorted({analysis.sliding_windows[l] for l in windowed})
    st.caption(
        f"Layer{'s' if len(windowed) > 1 else ''} {', '.join(map(str, windowed))} of {model.name} attend{'' if len(windowed) > 1 else 's'} "
        f"through a sliding window of {' or '.join(map(str, sizes))} tokens: a token sees only the "
        f"{'last few' if len(sizes) > 1 else sizes[0]} tokens up to itself there, so the keys further back are drawn "
        "grey (masked by the model), not as weights of 0."
    )
if not view.labels or not getattr(view, "key_labels", view.labels):
    st.info("Every token is a special token, so hiding them leaves nothing to show. Choose *Show* for special tokens.")
    end_page()

# the rows' and the columns' labels differ for cross-attention only; the stack and target are in every figure's key
keys = view.key_labels if stack.is_cross else None
# what every figure is drawn from (the text, or the source and target, with the limit and knock-out) and with
figure_run = current_run(one_stack, ablation)
inputs = (source, special, words) + (() if one_stack else (stack.kind,))
what = "" if one_stack else f" · {stack.label.lower()}"
drawn = AttentionFigures(figure_run, inputs, view, style, f"{model.name}{' (ablated run)' if ablation else ''}{what}",
                         model.name, stack.kind, head_names, keys, hidden, analysis.sliding_windows)
overview = drawn.overview(overview_title(drawn.who, source))
show_figure(overview.figure, name=overview.name, data=overview.data, key="attention-overview")
if stack.is_cross and not present:
    st.caption("Cross-attention thumbnails are not square: each has a row per target token and a column per source token.")

@friendly_fragment
def one_head_or_layer(model, analysis, stacks: tuple, stack, drawn: AttentionFigures, ablation) -> None:
    """Layer, head and view pickers and the figure they choose: a click here reruns only this part (so it reads
    ``model`` and ``analysis`` from its arguments, not from the run that defined it).

    ``stacks``/``stack``: the model's stacks (``ui.seq2seq.current_stacks``) and the one shown; ``drawn``: what every
    figure is drawn from (``ui.page_figures.AttentionFigures``). ``ablation``: the knock-out shown instead of the plain
    run (part of every figure's cache key), or None."""
    source, view = drawn.source, drawn.view
    layers, heads = view.matrices.shape[:2]
    left, right, mode = st.columns([1, 1, 3])
    layer = option(left.selectbox, BLOCK_SELECT_LABEL, range(layers), key="layer", help=BLOCK_SELECT_HELP)
    shown = option(mode.segmented_control, "View", VIEWS, key="view", default=VIEWS[0], required=True)
    switch = shown == "one head" and source != "rollout"  # its "Head n" buttons are the head's one control
    head = unshown_option("head", range(heads)) if switch else option(
        right.selectbox, "Head (counted from 0)", range(heads), key="head", disabled=source == "rollout",
        help="Rollout averages the heads, so it has none of its own." if source == "rollout" else None)

    if shown == "one head" and switch:
        # every head of the layer in the browser: another head is drawn there, then reported; after another layer,
        # the shown head goes first, the rest when the browser asks for it
        head_switch(drawn.cells(layer), head, axes=axis_titles(stack))
        # the head's Plotly figure is not drawn (the switch shows its cells): built only for a download or a pin
        one = drawn.head_view(layer, head)
        figure_downloads(lambda: drawn.head(layer, head, axis_titles(stack)).figure, name=one.name, data=one.data,
                         key="attention-head", reserve_margins=True)
        # The neighbouring layers, while the reader looks at this one, so choosing one only sends it; not on a shared
        # workshop server, where work done ahead for one reader is CPU taken from the others' clicks.
        if not current_settings().server_mode:
            work_ahead([drawn.cells_later(at) for at in (layer + 1, layer - 1) if 0 <= at < layers], key="attention-ahead")
    elif shown == "one head":  # rollout: one figure, its head control disabled
        one = drawn.head(layer, head, axis_titles(stack))
        show_figure(one.figure, name=one.name, data=one.data, key="attention-head", reserve_margins=True)
    elif shown == "one layer":
        grid = drawn.layer(layer)
        show_figure(grid.figure, name=grid.name, data=grid.data, key="attention-layer")
    elif stack.kind == SINGLE_STACK:
        bertviz(model, analysis, view, layer, head, ablation)
    else:  # BertViz's own encoder-decoder view of the three stacks
        pair_bertviz(stacks, stack, drawn.run, *drawn.inputs[1:3], layer)

def bertviz(model, analysis, view, layer: int, head: int, ablation) -> None:
    """BertViz's head, model or neuron view, offline, for the chosen layer and head."""
    layers, heads = view.matrices.shape[:2]
    kind = BERTVIZ[option(st.radio, "BertViz view", list(BERTVIZ), key="bertviz", horizontal=True)]
    n = len(view.labels)
    html = None
    if kind == "neuron":
        labels = token_labels(analysis)
        weights = analysis.attentions.size
        st.caption("The neuron view explains raw attention token by token (q·k/√d, then softmax), so it ignores "
                   "the source, special-token and word-level options. Click a token on the left, then the ⊕ icon.")
        if weights > bv.MAX_WEIGHTS:
            st.warning(f"The neuron view needs every layer and head: {weights:,} weights at {analysis.num_tokens} tokens, "
                       f"more than it draws smoothly ({bv.MAX_WEIGHTS:,}). Use a shorter text for it.")
        else:
            try:
                queries, keys = results.neuron_view_queries_keys(current_model_name(), current_text(),
                                                                 max_tokens=current_token_limit(), ablation=ablation)
                html = bv.neuron_view_html(analysis.attentions, queries, keys, labels, bidirectional=not model.is_decoder,
                                           layer=layer, head=head)
            except UnsupportedArchitecture as err:
                st.warning(f"No neuron view for this model: {err}")
        height = bv.view_height("neuron", len(labels), layers, heads)
    else:
        sent, why = bv.layers_to_send(layers, heads, n, layer)
        if why:
            (st.info if sent else st.warning)(why)
        if sent:
            build = bv.head_view_html if kind == "head" else bv.model_view_html
            html = build(view.matrices, view.labels, layers=sent, **({"layer": layer} if kind == "head" else {}))
        height = bv.view_height(kind, n, len(sent), heads)
    if html is not None:
        st.iframe(html, height=height)

one_head_or_layer(model, analysis, stacks, stack, drawn, ablation)
