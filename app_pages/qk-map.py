"""Queries and keys: one head's queries and keys over a whole corpus on one map (AttentionViz), and every head's map
as small multiples."""

import time
from functools import partial

import pandas as pd
import streamlit as st

from core.attention_heads.qk_map import QueryKeyMapError
from core.attention_heads.qk_map_quality import (
    NEIGHBOURS_FOR_ORDER,
    agreement_sentence,
    first_key_share,
    map_points,
    order_sentence,
    query_reading,
    rotary_orders,
    rotary_sentence,
)
from core.maths.projection import METHOD_NAMES
from ui import results
from ui.explain import controls, explain
from ui.figures import show_figure
from ui.page_state import end_page, option, set_option
from ui.progress_text import bar_progress
from ui.qk_map_page import chosen_documents, clicked, map_figure, query_label
from ui.seq2seq import stop_unless_one_stack
from ui.session import current_model, current_model_name, current_token_limit
from ui.umap_warmup import start_umap_warmup
from viz.common import file_stem, markdown_safe, plotly_safe
from viz.qk_map import COLOUR_NAMES, matrix_figure

METHODS = {"PCA": "pca", "UMAP": "umap", "t-SNE": "tsne"}
COLOURS = {name: key for key, name in COLOUR_NAMES.items()}
TOP_KEYS = 5
MAP_KEY, MATRIX_KEY = "qk-map", "qk-matrix"

st.title("Queries and keys: a whole corpus on one head's map")
explain(
    "A head compares every token's **query** with the **keys** of the tokens it may look at; the larger the dot "
    "product, the more attention. Here every token of a corpus is drawn twice, as a query (circle) and as a key "
    "(diamond), on one 2-D map of a head (AttentionViz, Yeh et al. 2023). Before projecting, queries are scaled by c "
    "and keys by 1/c so their mean lengths match (every dot product unchanged), and one vector is added to every key "
    "so both clouds share a centre (each query's attention unchanged: the same number is added to all its scores). "
    "A query then tends to sit near the keys it attends to; the figure beside the map says how often it does."
)
model = current_model()
stop_unless_one_stack("This map reads one stack's queries and keys over a corpus, which has no targets for the decoder, "
                      "so this page does not apply.")


with controls("Corpus"):
    texts, corpus_name = chosen_documents()
texts = tuple(texts)
limit = current_token_limit()
left, middle, right = st.columns([1, 1, 2])  # the projection's three names whole on a laptop with the sidebar open
layer = option(left.selectbox, "Layer", list(range(model.num_layers)), key="layer")
head = option(middle.selectbox, "Head", list(range(model.num_heads)), key="head")
method_name = option(right.segmented_control, "Projection", list(METHODS), default="PCA", key="method", required=True)
method = METHODS[method_name]

# what one pass records: every layer of an encoder (the matrix view shows them all), else only ``layer`` (a decoder's
# pass then stops after it)
layers = None if not model.is_decoder else (layer,)
name = current_model_name()
bar = st.empty()
try:
    corpus = results.qk_corpora(name, texts, layers, max_tokens=limit,
                                progress=bar_progress(bar, "Running the model: {done} of {total} documents"))
except QueryKeyMapError as err:
    bar.empty()
    st.info(str(err), icon=":material/info:")
    end_page()
bar.empty()
recorded = corpus.layers[layer]
left_out = corpus.num_texts - corpus.texts_used
st.caption(markdown_safe(
    f"{corpus.num_tokens:,} tokens of {corpus.texts_used:,} documents from {corpus_name}, through {model.name}"
    + (f"; the last {left_out:,} documents are left out, past {corpus.num_tokens:,} tokens" if left_out else "")
    + (f"; {corpus.truncated:,} documents are cut at {limit} tokens" if corpus.truncated else "") + "."))

# a row of its own: in half the main column of a 1024-px window with the sidebar open, "token" was cut off
colour_by = COLOURS[option(st.segmented_control, "Colour by", list(COLOURS), default=COLOUR_NAMES["kind"], key="colour",
                           required=True)]
rotary = True
if recorded.has_rotary:
    rotary = option(st.toggle, "After the rotary embedding", value=True, key="rotary",
                    help="What the dot product compares: queries and keys turned by an angle that grows with their "
                    "position. Off: the same vectors before that turn.")

if method == "umap":
    warmup = start_umap_warmup(now=True)
    if warmup.is_alive():
        with st.status("Preparing UMAP: numba compiles it once per server start. PCA is ready at once.") as status:
            warmup.join()
            status.update(label="UMAP is ready.", state="complete")
cached = results.qk_maps.peek(name, texts, layers, layer, head, rotary, method, max_tokens=limit) is not None
started = time.perf_counter()
with st.spinner(f"Projecting {2 * corpus.num_tokens:,} points with {method_name}…"):
    qmap = results.qk_maps(name, texts, layers, layer, head, rotary, method, max_tokens=limit)
if not cached and method != "pca":
    st.caption(f"{method_name} projected {2 * corpus.num_tokens:,} points in {time.perf_counter() - started:.1f} s; "
               "the map is kept for this corpus and head.")

n = qmap.num_tokens
click = clicked(MAP_KEY)
if click and str(click[1]).startswith("query"):
    set_option("query", int(click[0]))


query = option(st.selectbox, "Query: pick one, or click a circle on the map", [-1, *range(n)], key="query",
               format_func=partial(query_label, qmap))
reading = query_reading(qmap, query, TOP_KEYS) if query >= 0 else None
lines = (query, reading.keys, reading.weights) if reading else None

title = (f"Layer {layer}, head {head}{'' if qmap.kv_head == head else f' (key head {qmap.kv_head})'}: {n:,} queries "
         f"and keys, {method_name}{'' if rotary or not recorded.has_rotary else ', before the rotary embedding'}")
figure = results.figures(name, texts, "qk-map", layer, head, rotary, method, colour_by, query, max_tokens=limit,
                         build=partial(map_figure, qmap, colour_by=colour_by, title=title, axis=method_name, lines=lines))
plot, text = st.columns([3, 2])
with plot:
    show_figure(figure, name=file_stem(model.name, "qk-map", "layer", layer, "head", head, method,
                                       None if rotary else "before-rotary"),
                data=partial(map_points, qmap), key=MAP_KEY, share=0.6, on_select="rerun")
with text:
    agreement = results.qk_agreements(name, texts, layers, layer, head, rotary, method, max_tokens=limit)
    st.markdown(markdown_safe(agreement_sentence(agreement, method_name, qmap.queries.shape[1], first_key_share(qmap))))
    if reading:
        listed = ", ".join(f"“{qmap.tokens[k]}” ({w:.2f})" for k, w in zip(reading.keys, reading.weights, strict=True))
        st.markdown(markdown_safe(
            f"Query “{qmap.tokens[query]}” attends most to {listed} (the lines). Its nearest key of its own text on "
            f"the map is “{qmap.tokens[reading.nearest]}”" + (", the one it attends to most."
                                                              if reading.nearest == reading.keys[0]
                                                              else f", which gets {reading.nearest_weight:.2f}.")))
    if recorded.has_rotary:
        other = results.qk_maps(name, texts, layers, layer, head, not rotary, "pca", max_tokens=limit)
        this = qmap if method == "pca" else results.qk_maps(name, texts, layers, layer, head, rotary, "pca",
                                                            max_tokens=limit)
        after, before = rotary_orders(*((this, other) if rotary else (other, this)))
        explain(
            f"**Rotary embedding.** {markdown_safe(model.name)} turns each query and key by angles that grow with its "
            "position, so their dot product depends on how far apart the two tokens are. The map after the turn shows "
            "what the dot product compares; before it, a query or key carries position only as far as the layers below "
            "wrote it into the hidden state. " + markdown_safe(rotary_sentence(after, before)) + " (ρ: the Spearman "
            "correlation between each point's "
            f"position and the mean position of its {NEIGHBOURS_FOR_ORDER} nearest points on the PCA map.)",
            caption=True,
        )
    if model.is_decoder:
        st.caption(f"{markdown_safe(model.name)} is a decoder: each query looks only at its own key and the keys "
                   "before it in its document; a document's first query has one key, so it is not counted above.")

st.header("Every head at a glance")
shown: tuple[int, ...] = (layer,)
if not model.is_decoder:
    if option(st.toggle, "Every layer", value=False, key="all_layers",
               help="On: every head of every layer (one map each, from the same pass). Off: the heads of the layer "
               "chosen above."):
        shown = tuple(range(model.num_layers))
else:  # issue 50, item 14: say why a decoder has no "Every layer" switch
    st.caption(markdown_safe(
        f"Only layer {layer}'s heads: for a decoder such as {model.name} the page runs the model only up to the layer "
        f"chosen above and keeps that layer's queries and keys. Every layer would need a pass through all "
        f"{model.num_layers} layers and {model.num_layers * model.num_heads:,} maps of {2 * corpus.num_tokens:,} "
        "points each, minutes of work on a small server, so there is no \"Every layer\" switch here; pick another "
        "layer above to see its heads."))
matrix_method = method if method != "pca" and all(  # the matrix draws another method only where every map is kept
    results.qk_maps.peek(name, texts, layers, lay, h, rotary, method, max_tokens=limit) is not None
    for lay in shown for h in range(model.num_heads)) else "pca"
if method != "pca" and matrix_method == "pca" and len(shown) == 1:
    if st.button(f"Compute {method_name} for every head of layer {layer}", key="qk-compute-all"):
        with st.spinner(f"{method_name} of {model.num_heads} heads…"):
            for h in range(model.num_heads):
                results.qk_maps(name, texts, layers, layer, h, rotary, method, max_tokens=limit)
        st.rerun()
with st.spinner(f"Drawing {len(shown) * model.num_heads} maps…"):
    panels = results.qk_thumbnails(name, texts, layers, shown, rotary, matrix_method, max_tokens=limit)
picked = clicked(MATRIX_KEY)
if picked and len(picked) == 2:
    set_option("layer", int(picked[0]))
    set_option("head", int(picked[1]))
    set_option("query", -1)
    st.rerun()
show_figure(
    results.figures(name, texts, "qk-matrix", shown, rotary, matrix_method, max_tokens=limit, build=partial(
        matrix_figure, [(lay, h, xy_q, xy_k) for lay, h, xy_q, xy_k, _ in panels], model.num_heads,
        title=plotly_safe(f"{len(panels)} heads, {METHOD_NAMES[matrix_method]}: each panel is one head's map "
                          "(layer.head); click one to open it"))),
    name=file_stem(model.name, "qk-matrix", matrix_method), key=MATRIX_KEY, on_select="rerun",
    data=pd.DataFrame([{"layer": lay, "head": h, "position_order": o} for lay, h, _, _, o in panels]),
)
st.markdown(markdown_safe(order_sentence([(lay, h, o) for lay, h, _, _, o in panels])))
explain(
    "Heads whose panels look alike tend to compare tokens alike. A map ordered by position (ρ near 1: a point's "
    "neighbours on the map sit at the same place in their documents) is what a head that attends by position, such "
    "as to the previous token, tends to draw; ρ near 0 means position says nothing about where a point lands. "
    + ("Panels are drawn with PCA, which is instant; with UMAP or t-SNE chosen above, compute every head's map with "
       "the button to draw them that way. " if matrix_method == "pca" else "")
    + f"Each panel draws the same {len(panels[0][2]) if panels else 0:,} tokens, evenly spread over the corpus; ρ is "
    "measured on all of them.",
    caption=True,
)
