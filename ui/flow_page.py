"""The Information flow page for an encoder-decoder (``core.causal.flow_pair``): the sidebar's source and target, the route
across both stacks, and the detail of an edge or node picked on the figure or from the list. Also what both versions
of the page share: the one reading of a click on the route figure (``clicked``) and an MLP node's top-neurons table
(``show_neurons``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from core.causal.flow import DEFAULT_THRESHOLD, head_terms, route_graph
from core.causal.flow_details import Neurons, decode
from core.causal.flow_pair import ENCODER, PairFlow, decoder_logits, pair_route_sentence, pair_top_neurons
from core.causal.unembedding import top_tokens
from core.maths.numbers import percent
from core.model.models import LoadedModel
from core.model.recording import UnsupportedArchitecture
from core.model.tokens import token_labels
from ui import results
from ui.errors import friendly_fragment
from ui.figures import clicked_point, show_figure
from ui.page_state import end_page, option, option_value, set_option
from ui.seq2seq import current_pair, current_target, pair_caption
from ui.session import current_model_name, current_text, current_token_limit
from viz.common import file_stem, markdown_safe
from viz.flow import edge_id, node_id
from viz.flow_pair import PairLayout, pair_edge_table, pair_route_figure
from viz.inside import token_bars

TOP_K = 5
TOP_NEURONS = 8
NOTHING = "none"
GRAPH_KEY = "flow-graph"


def clicked(chart_key: str) -> str | None:
    """The id (``customdata``) of the edge or node last clicked on the chart ``chart_key``, once per click."""
    found = clicked_point(chart_key)
    return found if isinstance(found, str) else None


def pair_flow_page(model: LoadedModel) -> None:
    """The page's content for an encoder-decoder ``model`` (the caller ends the page after it)."""
    pair = current_pair()  # the model writes a target first when the box is empty
    st.caption(pair_caption(pair))  # as the other encoder-decoder pages: the start token in a code span
    name, source, limit = current_model_name(), current_text(), current_token_limit()
    slot = st.empty()
    try:
        flow = results.pair_flows(name, (source, current_target()), max_tokens=limit, progress=lambda done, total: slot.progress(
            done / total, text=f"Splitting the updates into their parts: layer {done} of {total} (encoder, then decoder)"))
    except UnsupportedArchitecture as err:
        slot.empty()
        st.info(f"The information-flow graph needs the parts of every attention update, which the app cannot take "
                f"apart in {markdown_safe(model.name)} ({markdown_safe(str(err).rstrip('.'))}).", icon=":material/info:")
        end_page()
    slot.empty()
    layout = PairLayout(token_labels(pair.source), token_labels(pair.target), flow.contributions.encoder.num_layers,
                        flow.contributions.num_layers)
    if flow.recorded.decoder.post_norm:
        st.caption("This model normalises the residual stream after adding each update (a post-norm block, as in "
                   "BART), so a node's shares are those of the sum before that norm: the stream it received and each "
                   "term of the update.")
    if flow.recorded.unembedding is None or not model.can_generate:
        st.info(f"{markdown_safe(model.name)} has no trained language-model head, so the details below show the shares "
                "and attention weights but no promoted or suppressed tokens.", icon=":material/info:")
    pair_route_view(model, flow, layout)


def _token_table(model: LoadedModel, logits: np.ndarray) -> pd.DataFrame:
    up, down = top_tokens(model, logits, TOP_K), top_tokens(model, logits, TOP_K, lowest=True)
    return pd.DataFrame({"promoted": [tok for tok, _ in up], "logit change (promoted)": [v for _, v in up],
                         "suppressed": [tok for tok, _ in down], "logit change (suppressed)": [v for _, v in down]})


def _vocabulary(model: LoadedModel) -> bool:
    return model.can_generate


def route_controls(label: str, names) -> tuple[int, float]:
    """The route's two controls side by side: the position it leads into (``label``, its ``names`` shown; the last by
    default) and the threshold an edge must carry."""
    left, right = st.columns(2)
    position = option(left.selectbox, label, range(len(names)), index=len(names) - 1, key="token",
                      format_func=lambda i: f"{i}: {names[i]}")
    threshold = option(right.slider, "Threshold (share of a node's inputs)", 0.01, 0.5, DEFAULT_THRESHOLD, 0.01,
                       key="threshold", help=f"An edge is drawn when it carries more than this share of what reaches "
                       f"its node; {DEFAULT_THRESHOLD} as in Ferrando & Voita (2024).")
    return position, threshold


@friendly_fragment
def pair_route_view(model: LoadedModel, flow: PairFlow, layout: PairLayout) -> None:
    """Decoder position and threshold, the route they give, and the detail of an edge or node picked from it."""
    contributions, target = flow.contributions, layout.target
    t = contributions.num_positions
    position, threshold = route_controls("Decoder position", target[:t])
    graph = route_graph(contributions, position, threshold)
    sentence = pair_route_sentence(graph, layout.source, target)
    drawing = st.container()
    st.markdown(markdown_safe(sentence))
    edges = sorted(graph.edges, key=lambda e: -e.weight)
    nodes = sorted(graph.nodes, key=lambda n: (not n[0].startswith(ENCODER), -n[1], n[2]))
    items = {NOTHING: None} | {edge_id(e): e for e in edges} | {node_id(n): n for n in nodes}
    click = clicked(GRAPH_KEY)
    if click in items:
        set_option("item", click)
    before = option_value("item")
    picked = option(st.selectbox, f"Details of an edge or a node ({len(edges)} edges, {len(nodes)} nodes): click "
                    "one on the graph or pick it here", list(items), key="item",
                    format_func=lambda i: "Pick an edge or a node…" if i == NOTHING
                    else layout.edge_name(items[i]) if "|" in i else layout.name(items[i]))
    if before is not None and picked != before and "|" in picked and items[picked].heads:
        set_option("head", items[picked].top_head)  # a newly picked edge opens on its top head
    with drawing:
        show_figure(pair_route_figure(graph, layout, picked=picked, title=f"Route into “{target[position]}” (decoder "
                                      f"position {position}), threshold {threshold:.2f}"),
                    name=file_stem(model.name, "flow", f"position{position}", f"threshold{threshold:.2f}"),
                    data=lambda: pair_edge_table(graph, layout), key=GRAPH_KEY, alt=sentence, on_select="rerun")
    if picked != NOTHING:
        (_edge_detail if "|" in picked else _node_detail)(model, flow, layout, items[picked])


def _residual(flow: PairFlow, node):
    """The decoder's residual stream at ``node`` (after self-attention, after cross-attention, after the block)."""
    kind, layer, p = node
    decoder = flow.recorded.decoder
    return {"embedding": lambda: decoder.residual_pre[0, p], "attention": lambda: decoder.residual_mid[layer, p],
            "cross": lambda: flow.recorded.cross_mid[layer, p], "block": lambda: decoder.residual_post[layer, p]}[kind]()


def _node_detail(model: LoadedModel, flow: PairFlow, layout: PairLayout, node) -> None:
    kind, layer, p = node
    c = flow.contributions
    st.subheader(markdown_safe(layout.name(node)))
    encoder = kind.startswith(ENCODER)
    shares = c.encoder if encoder else c
    base = kind.removeprefix(ENCODER)
    if base == "mlp":
        share = float(shares.mlp[layer, p])
        st.markdown(markdown_safe(f"The MLP's share of hidden state {layer + 1} at this position: {percent(share, 1)}; the "
                                  f"residual stream passed on carries the other {percent(1 - share, 1)}."))
        _neurons(model, flow, "encoder" if encoder else "decoder", layer, p)
    elif base == "cross":
        share = float(c.cross_residual[layer, p])
        st.markdown(markdown_safe(f"Cross-attention brings {percent(1 - share, 1)} of this representation from the source "
                                  f"(summed over heads and source tokens); the stream it was added to carries {percent(share, 1)}."))
    elif base == "attention":
        share = float(shares.attention_residual[layer, p])
        st.markdown(markdown_safe(f"Self-attention brings {percent(1 - share, 1)} of this representation (summed over heads "
                                  f"and positions); the stream it was added to carries {percent(share, 1)}."))
    if encoder:
        st.caption("The encoder's representations are read by the decoder only through cross-attention, not by the "
                   "unembedding: no logit lens here.")
    elif base != "mlp" and _vocabulary(model):
        logits = _logits(flow, _residual(flow, node), p, lens=True)
        if logits is not None:
            st.markdown("**Logit lens**: this representation through the decoder's final norm and the unembedding, "
                        "as if it were the last layer's.")
            top = top_tokens(model, logits, TOP_K)
            st.dataframe(pd.DataFrame({"token": [tok for tok, _ in top], "logit": [v for _, v in top]}),
                         hide_index=True)


def _neurons(model: LoadedModel, flow: PairFlow, stack: str, layer: int, p: int) -> None:
    """The top neurons of ``stack``'s MLP in layer ``layer`` at position ``p``; a decoder's with the token each one's
    write raises and lowers most (the encoder's are not read by the unembedding)."""
    try:
        neurons = pair_top_neurons(model, flow.recorded, stack, layer, p, TOP_NEURONS)
    except UnsupportedArchitecture as err:
        st.caption(markdown_safe(str(err)))
        return
    written = _logits(flow, neurons.terms, p) if stack == "decoder" and _vocabulary(model) else None
    show_neurons(neurons, written, model)


def show_neurons(neurons: Neurons, written: np.ndarray | None, tokenizer_owner) -> None:
    """An MLP's top neurons (``core.causal.flow_details.Neurons``) as both flow pages list them: index, activation and
    share; where ``written`` [k, V] (each neuron's write through the final norm and the unembedding) is given, the
    token it raises and lowers most, decoded by ``tokenizer_owner.tokenizer``."""
    table = pd.DataFrame({"neuron": neurons.index, "activation": neurons.activation, "share": neurons.share})
    if written is not None:
        table["raises most"] = decode(tokenizer_owner, written.argmax(axis=1))
        table["lowers most"] = decode(tokenizer_owner, written.argmin(axis=1))
    st.markdown("**Top neurons** " + markdown_safe(
        f"of the {neurons.count:,}: each neuron's write is its activation times its row of the MLP's "
        "output map, and the neurons' writes plus the map's bias add up to what the MLP wrote here. A neuron's share "
        "is the graph's proximity measure against that output, max(0, ‖y‖₁ − ‖y − write‖₁), over the sum of every "
        f"neuron's: these {len(neurons.index)} hold {percent(neurons.share.sum(), 1)} of it."))
    st.dataframe(table, hide_index=True)


def _logits(flow: PairFlow, vector, position: int, *, lens: bool = False):
    try:
        return decoder_logits(flow.recorded, vector, position, lens=lens)
    except UnsupportedArchitecture as err:
        st.caption(markdown_safe(str(err)))
        return None


def _edge_detail(model: LoadedModel, flow: PairFlow, layout: PairLayout, edge) -> None:
    st.subheader(markdown_safe(layout.edge_name(edge)))
    kind, layer, query = edge.target
    if edge.kind in ("residual", "mlp"):
        what = "The residual stream passed on unchanged" if edge.kind == "residual" else "The MLP"
        st.markdown(markdown_safe(f"{what} carries {percent(edge.weight, 1)} of {layout.name(edge.target)}."))
        if edge.kind == "mlp":  # its neurons, as on the MLP node (the one-stack page opens that node's detail)
            _neurons(model, flow, "encoder" if kind.startswith(ENCODER) else "decoder", layer, query)
        return
    key = edge.source[2]
    encoder, cross = kind.startswith(ENCODER), edge.kind == "cross"
    heads = sorted(range(len(edge.heads)), key=lambda h: -edge.heads[h])
    top = heads[0]
    via = "cross-attention" if cross else "self-attention"
    st.markdown(markdown_safe(
        f"Through all heads of {'encoder' if encoder else 'decoder'} layer {layer}'s {via}, "
        f"{layout.name(edge.source)} sends {percent(edge.weight, 1)} of what reaches {layout.name(edge.target)}; head {top} "
        f"alone carries {percent(edge.heads[top], 1)} ({percent(edge.heads[top] / edge.weight)} of this edge)."))
    head = option(st.selectbox, "Head", heads, key="head", format_func=lambda h: f"head {h} ({percent(edge.heads[h], 1)})")
    left, right = st.columns(2)
    with left:
        st.dataframe(pd.DataFrame({"head": heads, "share": [edge.heads[h] for h in heads]}), hide_index=True)
    recorded = flow.recorded
    if cross:
        row, labels = recorded.cross_records[layer].weights[0, head, query].float().numpy(), layout.source
    else:
        stack = recorded.encoder if encoder else recorded.decoder
        row, labels = stack.attention(layer, [head])[0, query], layout.source if encoder else layout.target
    reader = (layout.source if encoder else layout.target)[query]
    with right:
        show_figure(token_bars(row, labels, title=f"Layer {layer}, head {head}: {via} from “{reader}”", y_title="weight",
                               keep=None if encoder or cross else np.arange(len(labels)) <= query),
                    name=file_stem(model.name, "flow-row", "cross" if cross else "self", f"layer{layer}",
                                   f"head{head}", f"query{query}"),
                    data=pd.DataFrame({"position": range(len(labels)), "token": labels, "weight": row}),
                    key="flow-row", share=0.5)
    st.caption(markdown_safe(f"Head {head} gives “{labels[key]}” (position {key}) a weight of {row[key]:.3f} from "
                             f"“{reader}”; its largest weight, {row.max():.3f}, goes to “{labels[int(row.argmax())]}” "
                             f"(position {int(row.argmax())})."))
    if encoder or not _vocabulary(model):
        return
    write = recorded.cross_write(layer, query, key, head) if cross else \
        head_terms(recorded.decoder, layer, slice(query, query + 1))[0, key, head]
    logits = _logits(flow, write, query)
    if logits is not None:
        st.markdown(f"**What head {head} writes at decoder position {query} from "
                    f"{'source token' if cross else 'decoder position'} {key}** (its weight there × the value × its part "
                    "of the output projection), through the decoder's final norm (its scale frozen at this position's "
                    "last residual) and the unembedding: the tokens it raises and lowers most.")
        st.dataframe(_token_table(model, logits), hide_index=True)
