"""Information flow: which attention edges and MLPs carried what the model holds at one token, across all layers
(Ferrando & Voita 2024)."""

from typing import NamedTuple

import numpy as np
import pandas as pd
import streamlit as st

from core.causal.flow import route_graph
from core.causal.flow_details import head_write, top_neurons
from core.causal.flow_reading import Measures, node_sentence, route_sentence
from core.causal.unembedding import lens_logits, top_tokens, written_logits
from core.maths.numbers import percent
from core.model.models import BUNDLED_LM
from core.model.recording import UnsupportedArchitecture
from core.model.tokens import token_labels
from ui import results
from ui.errors import friendly_fragment
from ui.explain import explain
from ui.figures import main_column_width, show_figure
from ui.flow_page import clicked, pair_flow_page, route_controls, show_neurons
from ui.models import has_language_model, language_model_of
from ui.page_state import end_page, option, option_value, set_option
from ui.progress_text import FLOW_PROGRESS, bar_progress
from ui.session import app_token_limit, current_model, current_model_name, current_text, current_token_limit
from viz.common import file_stem, markdown_safe
from viz.flow import edge_id, edge_name, edge_table, node_id, node_name, route_figure
from viz.inside import token_bars

TOP_K = 5
TOP_NEURONS = 8
NOTHING = "none"
GRAPH_KEY = "flow-graph"


class FlowView(NamedTuple):
    """What this run's detail views read: the model, its recorded pass and contributions over ``labels`` (one per
    token), its language-model head (None when it has no unembedding) and what the sentences read beyond the shares."""
    model: object
    recorded: object
    contributions: object
    labels: list[str]
    language_model: object
    measures: Measures

st.title("Information flow")
explain(
    "Which routes through the model carried what it holds at one token? Every layer adds two updates to each "
    "token's residual stream: attention (a sum of one term per head and token it reads) and the MLP. Following "
    "Ferrando & Voita (2024), each term's **share** of the result is how much closer it brings the result than "
    "its absence would (the proximity max(0, ‖y‖₁ − ‖y − term‖₁), normalised so that a node's incoming shares add "
    "up to 1). The graph keeps the edges whose share is above the threshold and that lead to the chosen token's "
    "last representation: positions across, layers up, wider lines for larger shares, attention edges coloured by "
    "the head that carries most of them, MLPs as small squares. In an encoder-decoder (T5, BART …) each decoder "
    "layer adds a third update between the two, cross-attention (one term per head and source token), whose dotted "
    "edges join the decoder's route to the encoder's last layer."
)
model = current_model()
if model.is_encoder_decoder:  # the encoder's and the decoder's graphs, joined by cross-attention
    pair_flow_page(model)
    end_page()
name, text = current_model_name(), current_text()
limit = current_token_limit()  # this page's own limit (ui.page_limits), said above the page when it cuts the text
progress_slot = st.empty()
try:  # the text's trace (ui.results.traces), shared with every read-only page of this text and limit
    flow = results.flows(name, text, max_tokens=limit, progress=bar_progress(progress_slot, FLOW_PROGRESS))
except UnsupportedArchitecture as err:
    progress_slot.empty()
    st.info(f"The information-flow graph needs the parts of every attention update, which the app records for "
            f"decoders such as SmolLM2, Llama, Qwen and Gemma and encoders such as BERT and MiniLM, not for "
            f"{markdown_safe(model.name)} ({markdown_safe(str(err).rstrip('.'))}). Choose {markdown_safe(BUNDLED_LM)} "
            "in the sidebar to see the graph.", icon=":material/info:")
    end_page()
progress_slot.empty()
recorded, contributions, measures = flow.recorded, flow.contributions, flow.measures
sequence = recorded.trace.tokens("self")
labels = token_labels(sequence)  # the trace's tokens carry the text, pieces, spans and special mask it reads
if sequence.truncated and limit >= app_token_limit():  # a cut by this page's own limit is said above the page
    st.info(f"The text has {sequence.num_input_tokens:,} tokens and this app reads at most {limit:,} with "
            f"{markdown_safe(model.name)}, so the graph covers the first {len(sequence):,}.",
            icon=":material/content_cut:")
if recorded.post_norm:
    st.caption("This model normalises the residual stream after adding each update (a post-norm block, as in "
               "BERT), so a node's shares are those of the sum before that norm: the stream it received and each "
               "term of the update.")

language_model = None
if model.is_decoder:
    with st.spinner(f"Loading the language-model head of {name}…"):
        language_model = language_model_of(name) if has_language_model(name) else None
if language_model is None:
    why = ("it is an encoder, which has no unembedding" if not model.is_decoder
           else "its checkpoint has no language-model head (no unembedding)")
    st.info(f"{markdown_safe(model.name)} cannot turn a vector into tokens ({why}), so the details below show the "
            "shares and attention weights but no promoted or suppressed tokens.", icon=":material/info:")
    language_model = None


def token_table(language_model, logits: np.ndarray, what: str) -> pd.DataFrame:
    """The ``TOP_K`` tokens ``logits`` raises most and lowers most, side by side."""
    up, down = top_tokens(language_model, logits, TOP_K), top_tokens(language_model, logits, TOP_K, lowest=True)
    return pd.DataFrame({"promoted": [tok for tok, _ in up], f"{what} (promoted)": [v for _, v in up],
                         "suppressed": [tok for tok, _ in down], f"{what} (suppressed)": [v for _, v in down]})


def write_of(recorded, node, position: int):
    """What the sub-block that produced ``node`` added at ``position`` (None for the embedding)."""
    kind, layer, _ = node
    if kind == "attention":
        return recorded.block(layer).attention_update[position], f"layer {layer}'s attention"
    if kind in ("mlp", "block"):
        return recorded.block(layer).mlp_update[position], f"layer {layer}'s MLP"
    return None, ""


def residual_of(recorded, node, position: int):
    kind, layer, _ = node
    if kind == "embedding":
        return recorded.residual_pre(0)[position]
    return recorded.block(layer).mid[position] if kind == "attention" else recorded.residual_post(layer)[position]


def node_detail(view: FlowView, node) -> None:
    recorded, labels, language_model = view.recorded, view.labels, view.language_model
    kind, layer, p = node
    st.subheader(markdown_safe(node_name(node, labels)))
    st.markdown(markdown_safe(node_sentence(view.contributions, view.measures, node, labels)))
    if kind == "attention" and not view.measures.unmeasured(node):
        incoming_table(view, layer, p)
    final = recorded.residual_post(recorded.num_layers - 1)[p]
    if kind != "mlp":
        residual = residual_of(recorded, node, p)
        if language_model is not None:
            st.markdown("**Logit lens**: this representation through the final norm and the unembedding, as if it "
                        "were the last layer's.")
            lens = lens_logits(language_model, residual)
            top = top_tokens(language_model, lens, TOP_K)
            st.dataframe(pd.DataFrame({"token": [tok for tok, _ in top], "logit": [v for _, v in top]}),
                         hide_index=True)
    write, writer = write_of(recorded, node, p)
    if write is not None and language_model is not None:
        st.markdown(f"**What {writer} wrote here**, through the final norm (its scale frozen at this token's last "
                    "residual) and the unembedding: the tokens it raised and lowered most.")
        st.dataframe(token_table(language_model, written_logits(language_model, write, final), "logit change"),
                     hide_index=True)
    if kind == "mlp":
        neuron_table(view, layer, p, final)


def incoming_table(view: FlowView, layer: int, p: int) -> None:
    """What reaches layer ``layer``'s attention node at token ``p``: the keys with the largest summed shares, each
    with its top head, that head's share and its attention weight from ``p``."""
    contributions, labels = view.contributions, view.labels
    summed = contributions.key_shares[layer, p]
    keys = [int(k) for k in np.argsort(-summed, kind="stable")[:TOP_K] if summed[k] > 0]
    heads = [int(np.argmax(contributions.attention[layer, p, k])) for k in keys]
    weights = view.recorded.attention(layer)
    st.dataframe(pd.DataFrame({
        "key": keys, "token": [labels[k] for k in keys], "share": [float(summed[k]) for k in keys],
        "top head": heads, "its share": [float(contributions.attention[layer, p, k, h]) for k, h in zip(keys, heads)],
        "its attention weight": [float(weights[h, p, k]) for k, h in zip(keys, heads)]}), hide_index=True)


def neuron_table(view: FlowView, layer: int, p: int, final) -> None:
    """The MLP's top neurons at token ``p`` by the graph's proximity measure, with what each one's write raises and
    lowers most (for a language model)."""
    language_model = view.language_model
    try:
        neurons = top_neurons(view.model, view.recorded, layer, p, TOP_NEURONS)
    except UnsupportedArchitecture as err:
        st.caption(markdown_safe(str(err)))
        return
    # [k, V]: one pass over the unembedding
    written = None if language_model is None else written_logits(language_model, neurons.terms, final)
    show_neurons(neurons, written, language_model)


def edge_detail(view: FlowView, edge) -> None:
    model, recorded, labels, language_model = view.model, view.recorded, view.labels, view.language_model
    t = recorded.num_tokens
    st.subheader(markdown_safe(edge_name(edge, labels)))
    _, layer, query = edge.target
    if edge.kind == "residual":
        st.markdown(markdown_safe(node_sentence(view.contributions, view.measures, edge.target, labels)
                                  if view.measures.unmeasured(edge.target) else
                                  f"The residual stream passed on unchanged carries {percent(edge.weight, 1)} of "
                                  f"{node_name(edge.target, labels)}."))
        return
    if edge.kind == "mlp":
        node_detail(view, ("mlp", layer, query))
        return
    key = edge.source[2]
    heads = sorted(range(len(edge.heads)), key=lambda h: -edge.heads[h])
    shares = pd.DataFrame({"head": heads, "share": [edge.heads[h] for h in heads]})
    top = heads[0]
    st.markdown(markdown_safe(
        f"Through all heads of layer {layer}, token {key} sends {percent(edge.weight, 1)} of what reaches token {query} after "
        f"attention; head {top} alone carries {percent(edge.heads[top], 1)} "
        f"({percent(edge.heads[top] / edge.weight)} of this edge)."))
    head = option(st.selectbox, "Head", heads, key="head",
                  format_func=lambda h: f"head {h} ({percent(edge.heads[h], 1)})")
    left, right = st.columns(2)
    with left:
        st.dataframe(shares, hide_index=True)
    row = recorded.attention(layer, [head])[0, query]
    with right:
        show_figure(token_bars(row, labels, title=f"Layer {layer}, head {head}: attention from “{labels[query]}”",
                               y_title="weight", keep=np.arange(t) <= query if model.is_decoder else None),
                    name=file_stem(model.name, "flow-row", f"layer{layer}", f"head{head}", f"query{query}"),
                    data=pd.DataFrame({"position": range(t), "token": labels, "weight": row}),
                    key="flow-row", share=0.5)
    st.caption(markdown_safe(f"Head {head} gives “{labels[key]}” (token {key}) a weight of {row[key]:.3f} from "
                             f"“{labels[query]}”; its largest weight, {row.max():.3f}, goes to "
                             f"“{labels[int(row.argmax())]}” (token {int(row.argmax())})."))
    if language_model is not None:
        write = head_write(recorded, layer, query, key, head)
        st.markdown(f"**What head {head} writes at token {query} from token {key}** (its weight there × the key's "
                    "value × its part of the output projection), through the final norm (its scale frozen at this "
                    "token's last residual) and the unembedding: the tokens it raises and lowers most.")
        written = written_logits(language_model, write, recorded.residual_post(recorded.num_layers - 1)[query])
        st.dataframe(token_table(language_model, written, "logit change"), hide_index=True)


@friendly_fragment
def route_view(view: FlowView) -> None:
    """Token and threshold, the graph they give, and the detail of an edge or node picked from it: a change reruns
    only this part and reuses the cached contributions."""
    model, contributions, labels = view.model, view.contributions, view.labels
    t = view.recorded.num_tokens
    position, threshold = route_controls("Token", labels[:t])
    graph = route_graph(contributions, position, threshold)
    sentence = route_sentence(graph, labels, view.measures.received)
    drawing = st.container()  # the figure, drawn once the list below knows which item is picked
    st.markdown(markdown_safe(sentence))
    edges = sorted(graph.edges, key=lambda e: -e.weight)
    nodes = sorted(graph.nodes, key=lambda n: (-n[1], n[2]))
    items = {NOTHING: None} | {edge_id(e): e for e in edges} | {node_id(n): n for n in nodes}
    click = clicked(GRAPH_KEY)
    if click in items:
        set_option("item", click)
    before = option_value("item")  # the last run's pick in this session (None on a link's first run)
    picked = option(st.selectbox, f"Details of an edge or a node ({len(edges)} edges, {len(nodes)} nodes): click "
                    "one on the graph or pick it here",
                    list(items), key="item",
                    format_func=lambda i: "Pick an edge or a node…" if i == NOTHING
                    else edge_name(items[i], labels) if "|" in i else node_name(items[i], labels))
    if before is not None and picked != before and "|" in picked and items[picked].heads:
        set_option("head", items[picked].top_head)  # a newly picked edge opens on its top head
    with drawing:
        show_figure(route_figure(graph, labels, contributions.num_layers, picked=picked, width_px=main_column_width(),
                                 title=f"Route into “{labels[position]}” (token {position}), threshold {threshold:.2f}"),
                    name=file_stem(model.name, "flow", f"token{position}", f"threshold{threshold:.2f}"),
                    data=lambda: edge_table(graph, labels), key=GRAPH_KEY, alt=sentence, on_select="rerun")
    if picked != NOTHING:
        (edge_detail if "|" in picked else node_detail)(view, items[picked])


route_view(FlowView(model, recorded, contributions, labels, language_model, measures))
