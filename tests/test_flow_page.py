"""The Information flow page (issue 39): the route figure (viz.flow) with a clickable point per edge and node, the
route sentence, and the page in AppTest on a tiny Llama, a tiny BERT and SmolLM2 (the vocabulary projections and the
MLP's neurons against a plainly loaded model: tests/test_flow_details.py)."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest
import torch
from transformers import AutoModelForSeq2SeqLM

from core.causal.flow import Edge, RouteGraph, carriers, contributions_of, route_graph
from core.causal.flow_details import top_neurons
from core.causal.flow_pair import pair_contributions
from core.causal.flow_reading import route_sentence
from core.model.models import load_model
from core.model.seq2seq import analyze_pair
from core.model.trace import record
from core.outputs.predictions import load_language_model
from tests.lm_factory import build_tiny_llama_lm
from tests.model_factory import build_tiny_bart
from tests.test_app import open_app, page_errors
from tests.test_flow_pair import plain_mlps
from ui.page_state import view_query
from viz.flow import edge_id, edge_width, node_id, route_figure

HOSTILE = "<img src=x onerror=alert(1)>"
TEXT = "the cat sat on the mat and the dog sat on the log"


def example_route_graph() -> RouteGraph:
    """A hand-made route into token 2 of a 2-layer model: residual, MLP and attention edges of known weights."""
    edges = (
        Edge(("embedding", -1, 0), ("attention", 0, 1), 0.30, "attention", (0.05, 0.25)),
        Edge(("embedding", -1, 1), ("attention", 0, 1), 0.70, "residual"),
        Edge(("block", 0, 0), ("attention", 1, 2), 0.20, "attention", (0.15, 0.05)),
        Edge(("block", 0, 1), ("attention", 1, 2), 0.10, "attention", (0.02, 0.08)),
        Edge(("block", 0, 2), ("attention", 1, 2), 0.70, "residual"),
        Edge(("attention", 0, 1), ("mlp", 0, 1), 0.45, "mlp"),
        Edge(("mlp", 0, 1), ("block", 0, 1), 0.45, "mlp"),
        Edge(("attention", 0, 1), ("block", 0, 1), 0.55, "residual"),
        Edge(("attention", 1, 2), ("block", 1, 2), 0.95, "residual"),
    )
    return RouteGraph(2, 0.04, edges)


def _segments(fig) -> list[tuple[float, float, float, float, float]]:
    """(x0, y0, x1, y1, width) of every line segment the figure draws."""
    found = []
    for trace in fig.data:
        if trace.mode != "lines":
            continue
        xs, ys = list(trace.x), list(trace.y)
        for start in range(0, len(xs), 3):
            assert xs[start + 2] is None and ys[start + 2] is None  # None-separated segments
            found.append((xs[start], ys[start], xs[start + 1], ys[start + 1], trace.line.width))
    return found


def test_route_figure_draws_one_segment_per_edge_wider_for_heavier_edges():
    graph = example_route_graph()
    fig = route_figure(graph, ["a", "b", "c"], 2, title="route")
    segments = _segments(fig)
    assert len(segments) == len(graph.edges)
    heights = {"embedding": 0, "attention": 1, "mlp": 1.5, "block": 2}

    def where(node):
        kind, layer, p = node
        return (p + (0.3 if kind == "mlp" else 0), heights[kind] + 2 * max(layer, 0) * (kind != "embedding"))

    drawn = {(x0, y0, x1, y1): w for x0, y0, x1, y1, w in segments}
    widths = [drawn[(*where(e.source), *where(e.target))] for e in graph.edges]
    order = np.argsort([e.weight for e in graph.edges])
    assert all(np.diff(np.array(widths)[order]) >= 0)  # never thinner for a heavier edge
    assert widths[list(graph.edges).index(graph.edges[-1])] > widths[3]  # 0.95 wider than 0.10
    line_traces = [t for t in fig.data if t.mode == "lines"]
    assert len(line_traces) < len(graph.edges)  # grouped by colour and width, not one trace per edge
    heads = {t.name for t in line_traces}
    assert heads == {"head 1", "head 0", "MLP", "residual"}  # top head: 1, 0, 1


def test_every_edge_and_node_has_a_clickable_point_of_its_own():
    # an attention edge within one position shares its ends with the residual edge there: it bows, its point apart
    own = Edge(("block", 0, 2), ("attention", 1, 2), 0.25, "attention", (0.2, 0.05))
    graph = RouteGraph(2, 0.04, (*example_route_graph().edges, own))
    fig = route_figure(graph, ["a", "b", "c"], 2, title="route")
    (edges,) = [t for t in fig.data if t.name == "edges"]
    points = dict(zip(edges.customdata, zip(edges.x, edges.y, strict=True), strict=True))
    assert set(points) == {edge_id(e) for e in graph.edges}
    assert len(set(points.values())) == len(points)  # no two edges' points coincide
    assert points[edge_id(own)] == (2 - 0.2, 2.5) and points["residual|block:0:2>attention:1:2"] == (2, 2.5)
    nodes = [t for t in fig.data if t.mode == "markers" and t.name in ("representation", "MLP")]
    assert {c for t in nodes for c in t.customdata} == {node_id(n) for n in graph.nodes}
    assert all(t.unselected.marker.opacity == 1 for t in nodes)  # a click dims nothing
    assert "picked" not in [t.name for t in fig.data]
    for item, where in ((edge_id(own), points[edge_id(own)]), ("mlp:0:1", (1.3, 1.5))):  # the ring of the open detail
        (ring,) = [t for t in route_figure(graph, ["a", "b", "c"], 2, title="r", picked=item).data if t.name == "picked"]
        assert (ring.x[0], ring.y[0]) == pytest.approx(where)


def test_hostile_token_labels_are_escaped_in_hover_text_ticks_and_title():
    labels = ["a", HOSTILE, "c"]
    fig = route_figure(example_route_graph(), labels, 2, title=f"Route into {HOSTILE}")
    shown = json.dumps(fig.to_plotly_json(), ensure_ascii=False)
    assert "<img" not in shown and "&lt;img src=x onerror=alert(1)&gt;" in shown
    hovers = [h for t in fig.data if t.hovertext is not None for h in t.hovertext]
    assert any("&lt;img" in h for h in hovers)


def test_every_layer_of_a_deep_model_gets_rows_a_click_can_tell_apart():
    """Issue 50, item 11: SmolLM2's 30 layers × 2 node rows in about 450 px put the layers the sentence named in a
    20-px band over the embedding row. Each node row (one unit of y) needs at least 16 px of the plot."""
    for layers in (2, 6, 18, 30):
        fig = route_figure(example_route_graph(), ["a", "b", "c"], layers, title="r")
        margin = fig.layout.margin
        plot_px = fig.layout.height - (100 if margin.t is None else margin.t) - (80 if margin.b is None else margin.b)
        low, high = fig.layout.yaxis.range
        assert plot_px / (high - low) >= 16, (layers, fig.layout.height)


def test_the_last_mlp_square_lies_inside_the_plot():
    """Issue 50, item 16: the last column's MLP squares ran past the right edge on a phone."""
    last = RouteGraph(2, 0.04, (Edge(("attention", 0, 2), ("mlp", 0, 2), 0.5, "mlp"),
                                Edge(("mlp", 0, 2), ("block", 0, 2), 0.5, "mlp")))
    for width in (None, 358):  # a wide window's frame and a phone's
        fig = route_figure(last, ["a", "b", "c"], 1, title="r", width_px=width)
        squares = next(t for t in fig.data if t.name == "MLP" and t.mode == "markers")
        assert max(squares.x) == pytest.approx(2.3) and max(squares.x) + 0.25 <= fig.layout.xaxis.range[1]
        assert fig.layout.xaxis.range[0] <= -0.2 - 0.15  # the bow of an attention edge within token 0, and its node


def test_on_a_phone_every_token_of_up_to_20_keeps_its_label_and_the_legend_stands_under_its_title():
    """Issue 50, item 16b: at 390 × 844 (a 358-px column) the route labelled every other token: its frame (the long y
    title, "embedding", Plotly's default 80-px right margin) left the tick thinning too little room, and 15 tokens
    still showed 8 labels. The phone's frame writes "layer" above the layer numbers and draws the labels smaller (not
    under 9 px) so that 20 tokens keep theirs; the legend is horizontal with its title on a row of its own (beside the first row it
    kept every row to the right half of the figure), also when one entry is all it has."""
    from viz.fit.page import fit_for_page

    for count in (12, 15, 20):  # 15 tokens showed 8 labels (issue 50, item 16b), 20 is as many as a phone labels
        labels = [f"w{i}" for i in range(count)]
        graph = RouteGraph(count - 1, 0.04, tuple(Edge(("embedding", -1, p), ("attention", 0, count - 1), 1 / count,
                                                       "attention", tuple(1 / 12 if h == p % 12 else 0.0 for h in range(12)))
                                                  for p in range(count)))
        # a phone's 358-px column, measured in 20-px steps (ui.viewport.STEP_PX) as the page fits for it
        phone = fit_for_page(route_figure(graph, labels, 6, title=f"Route into “w{count - 1}”, threshold 0.04",
                                          width_px=340), 340)
        assert list(phone.layout.xaxis.ticktext) == labels, count
        size = phone.layout.xaxis.tickfont.size or 12
        assert size >= 9 and phone.layout.xaxis.tickangle == -90, (count, size)
        # by hand: the plot is at most the column less the right margin and the "emb." labels (4 characters, >= 20 px)
        low, high = phone.layout.xaxis.range
        assert (340 - phone.layout.margin.r - 20) / (high - low) >= size, (count, size)  # upright labels apart
        assert not phone.layout.yaxis.title.text and [a.text for a in phone.layout.annotations] == ["layer"]
    wide = fit_for_page(route_figure(graph, labels, 6, title="Route into “w11” (token 11), threshold 0.04"), 358)
    assert len(wide.layout.xaxis.ticktext) < len(labels)  # the wide window's frame, squeezed into a phone's column
    assert wide.layout.xaxis.tickfont.size is None  # the page's own size
    assert phone.layout.legend.orientation == "h" and phone.layout.legend.title.side == "top"
    alone = RouteGraph(2, 0.04, (Edge(("embedding", -1, 2), ("attention", 0, 2), 1.0, "residual"),))
    for width in (None, 358):  # a single entry: under the plot too, never beside it
        legend = route_figure(alone, ["a", "b", "c"], 1, title="r", width_px=width).layout.legend
        assert legend.orientation == "h" and legend.yref == "container" and legend.title.text


def test_edge_width_grows_with_weight():
    widths = [edge_width(w) for w in np.linspace(0, 1, 21)]
    assert widths[0] == 1.0 and widths[-1] == 8.0 and all(np.diff(widths) >= 0)


def test_route_sentence_names_the_position_whose_cross_position_edges_weigh_most():
    graph = example_route_graph()
    # by hand: token 0 sends 0.30 (layer 0, into token 1) + 0.20 (layer 1, into token 2) = 0.50; token 1 sends 0.10
    assert carriers(graph) == {0: (pytest.approx(0.5), [0, 1]), 1: (pytest.approx(0.1), [1])}
    sentence = route_sentence(graph, ["a", "b", "c"])
    assert "from “a” (token 0) carry the most: 2 edges in layers 0–1, whose shares add up to 0.50" in sentence
    assert "Next comes “b” (token 1) with 0.10." in sentence
    alone = RouteGraph(2, 0.04, tuple(e for e in graph.edges if e.kind != "attention"))
    assert "no attention edge brings information from another position" in route_sentence(alone, ["a", "b", "c"])


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """(folder, LoadedModel, LanguageModel) of a tiny random Llama with an untied head and uneven norm gains."""
    folder = build_tiny_llama_lm(tmp_path_factory.mktemp("flow-page") / "llama")
    model = load_model(str(folder))
    return folder, model, load_language_model(model)


def _said(at) -> str:
    return " ".join(m.value for m in [*at.markdown, *at.caption, *at.subheader]).replace("\\", "")


def _route_chart(at):
    """The route figure (by its key: the first page run of a process may also hold the start-up's hidden chart)."""
    (chart,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith("-flow-graph")]
    return chart


def _detail_box(at):
    return next(b for b in at.selectbox if b.label.startswith("Details of an edge or a node"))


@pytest.mark.app
def test_flow_page_draws_the_route_and_opens_an_edge_and_a_node(tiny_llama):
    folder, model, _ = tiny_llama
    text = "the cat sat"
    at = open_app({"model": str(folder), "text": text, "threshold": "0.01"}, page="app_pages/flow.py")
    assert not page_errors(at)
    chart = _route_chart(at)
    spec = json.loads(chart.proto.spec)
    ids = model.tokenizer(text)["input_ids"]
    graph = route_graph(contributions_of(record(model, text), ["x"] * len(ids)), len(ids) - 1, 0.01)
    drawn = sum(len([v for v in t["x"] if v is None]) for t in spec["data"] if t.get("mode") == "lines")
    assert drawn == len(graph.edges)  # the page's graph is core.causal.flow's at the threshold of the link
    assert f"({len(graph.edges)} edges, {len(graph.nodes)} nodes)" in _detail_box(at).label
    box = _detail_box(at)
    edge_ids = {edge_id(e) for e in graph.edges}
    node_ids = {node_id(n) for n in graph.nodes}
    assert len(box.options) == 1 + len(edge_ids) + len(node_ids)  # "Pick…", every edge and every node
    clickable = {name: set(t.get("customdata", [])) for t in spec["data"] if t.get("mode") == "markers"
                 for name in [t["name"]]}
    assert clickable["edges"] == edge_ids  # a click on the figure names the same items as the list
    assert clickable["representation"] | clickable["MLP"] == node_ids
    edge = max((e for e in graph.edges if e.kind == "attention" and e.source[2] != e.target[2]), key=lambda e: e.weight)
    box.set_value(edge_id(edge)).run()
    assert not page_errors(at)
    key, query = edge.source[2], edge.target[2]
    assert f"What head {edge.top_head} writes at token {query} from token {key}" in _said(at)
    assert "the tokens it raises and lowers most" in _said(at)
    assert [c.proto.id.rsplit("-", 2)[-2:] for c in at.get("plotly_chart")][-2:] == [["flow", "graph"], ["flow", "row"]]
    assert len(at.dataframe) == 2  # the route and the attention row; the heads' shares and the tokens
    row = json.loads(at.get("plotly_chart")[-1].proto.spec)["data"]  # issue 50, item 12: no "trace 0" in its legend
    assert [t.get("name") for t in row] == ["weight", "masked (−∞)"]
    assert view_query(at.session_state)["item"] == edge_id(edge)  # the pick is in the link
    drawn = json.loads(_route_chart(at).proto.spec)["data"]
    assert [t["name"] for t in drawn].count("picked") == 1  # and ringed on the figure
    other = next(e for e in graph.edges if e.kind == "attention" and e.top_head != edge.top_head)
    at.selectbox(key=next(b.key for b in at.selectbox if b.label == "Head")).set_value(
        next(h for h in range(len(edge.heads)) if h not in (edge.top_head, other.top_head))).run()
    _detail_box(at).set_value(edge_id(other)).run()  # another edge opens on its own top head, not the last one's
    assert not page_errors(at) and f"What head {other.top_head} writes" in _said(at)
    box = _detail_box(at)
    box.select_index(next(i for i, o in enumerate(box.options) if "→" not in o and "hidden state" in o)).run()
    assert not page_errors(at) and "Logit lens" in _said(at)
    mlp = next(n for n in graph.nodes if n[0] == "mlp")
    _detail_box(at).set_value(node_id(mlp)).run()
    assert not page_errors(at) and "Top neurons" in _said(at)
    neurons = top_neurons(model, record(model, text), mlp[1], mlp[2], 8)
    table = at.dataframe[-1].value
    assert list(table["neuron"]) == list(neurons.index) and list(table.columns[:3]) == ["neuron", "activation", "share"]


@pytest.mark.app
def test_flow_page_escapes_hostile_text(tiny_llama):
    folder, _, _ = tiny_llama
    at = open_app({"model": str(folder), "text": f"the cat {HOSTILE}", "threshold": "0.01"},
                  page="app_pages/flow.py")
    assert not page_errors(at)
    chart = _route_chart(at)
    assert "&lt;" in chart.proto.spec and not re.findall(r"<(?!br>|b>|/b>)", chart.proto.spec)  # only our own tags
    box = _detail_box(at)
    box.select_index(next(i for i, o in enumerate(box.options) if ">" in o and "→" not in o)).run()
    assert not page_errors(at)
    shown = " ".join(m.value for m in [*at.markdown, *at.caption, *at.subheader])
    assert "\\>" in shown and not re.search(r"(?<!\\)[<>]", shown)  # every < and > escaped: shown as text


@pytest.mark.app
def test_flow_page_on_an_encoder_draws_the_route_and_says_it_has_no_unembedding(tiny_bert_dir, tiny_bert):
    text = "the cat sat on the mat"
    at = open_app({"model": tiny_bert_dir, "text": text, "threshold": "0.01"}, page="app_pages/flow.py")
    assert not page_errors(at)
    (chart,) = at.get("plotly_chart")
    ids = tiny_bert.tokenizer(text)["input_ids"]
    graph = route_graph(contributions_of(record(tiny_bert, text), ["x"] * len(ids)), len(ids) - 1, 0.01)
    drawn = sum(len([v for v in t["x"] if v is None]) for t in json.loads(chart.proto.spec)["data"]
                if t.get("mode") == "lines")
    assert drawn == len(graph.edges) > 0
    said = " ".join(i.value for i in at.info)
    assert "it is an encoder, which has no unembedding" in said and "no promoted or suppressed tokens" in said
    assert "post-norm block" in _said(at)
    # issue 50, item 12: a node of an encoder (no unembedding) showed only its title; now its shares in a sentence,
    # and an attention node the keys it reads with their heads' attention weights
    contributions = contributions_of(record(tiny_bert, text), ["x"] * len(ids))
    node = next(n for n in graph.nodes if n[0] == "attention")
    _detail_box(at).set_value(node_id(node)).run()
    assert not page_errors(at)
    layer, p = node[1], node[2]
    assert f"carries {contributions.attention_residual[layer, p]:.1%} and the heads bring" in _said(at)
    table = at.dataframe[-1].value
    summed = contributions.attention[layer, p].sum(axis=1)
    assert int(table["key"].iloc[0]) == int(np.argmax(summed))
    assert float(table["share"].iloc[0]) == pytest.approx(float(summed.max()), abs=1e-6)
    block = next(n for n in graph.nodes if n[0] == "block")
    _detail_box(at).set_value(node_id(block)).run()
    assert f"Layer {block[1]}'s MLP brings {contributions.mlp[block[1], block[2]]:.1%}" in _said(at)


@pytest.mark.app
@pytest.mark.integration
def test_flow_page_on_smollm2_traces_the_capital_of_france(bundled_lm):
    text = "The capital of France is"
    at = open_app({"model": "SmolLM2-135M-Instruct", "text": text}, page="app_pages/flow.py")
    assert not page_errors(at)
    ids = bundled_lm.tokenizer(text)["input_ids"]
    recorded = record(bundled_lm, text)
    graph = route_graph(contributions_of(recorded, ["x"] * len(ids)), len(ids) - 1)
    top, (total, _) = next(iter(carriers(graph).items()))
    said = _said(at)
    assert f"(token {top}) carry the most" in said and f"add up to {total:.2f}" in said
    box = _detail_box(at)
    box.set_value(f"block:{recorded.num_layers('self') - 1}:{len(ids) - 1}").run()
    assert not page_errors(at)
    lens = at.dataframe[0].value
    with torch.no_grad():  # the model's own top prediction after the text
        predicted = load_language_model(bundled_lm).model(torch.tensor([ids])).logits[0, -1].argmax()
    assert bundled_lm.tokenizer.decode([int(predicted)]) == " Paris"
    assert lens["token"].iloc[0] == "·Paris"  # the space it carries shown as "·" (issue 50 item 10)


@pytest.fixture(scope="module", params=["bart", "t5"])
def tiny_pair_dir(request, tiny_t5_dir, tmp_path_factory) -> str:
    """A tiny T5, or a tiny BART whose attention and MLP weights are drawn wider than its init's 0.02 (there no
    cross-attention term and no MLP reaches 1% of its node)."""
    if request.param == "t5":
        return tiny_t5_dir
    folder = build_tiny_bart(tmp_path_factory.mktemp("flow-pair") / "bart")
    plain = AutoModelForSeq2SeqLM.from_pretrained(folder)
    torch.manual_seed(1)
    with torch.no_grad():
        for name, param in plain.named_parameters():
            if ("attn." in name or ".fc" in name) and param.ndim == 2:
                param.copy_(0.3 * torch.randn_like(param))
    plain.save_pretrained(folder)
    return str(folder)


def _numbers(values) -> np.ndarray:
    """A figure's data array as Plotly's JSON holds it: a list, or ``{dtype, bdata}`` (base64)."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"])
    return np.asarray(values, dtype=float)


@pytest.mark.app
def test_flow_page_on_an_encoder_decoder_draws_the_route_across_cross_attention(tiny_pair_dir):
    """The page draws core.causal.flow_pair's route of the sidebar's source and target (graph rebuilt here from a plain
    record of the same tokens), every edge and node clickable and in the list; a cross edge opens its head, its
    cross-attention row over the source and what it writes through the unembedding; a decoder node its logit lens."""
    source, target = "the cat sat on the mat", "the dog sat"
    at = open_app({"model": tiny_pair_dir, "text": source, "target": target, "threshold": "0.01"},
                  page="app_pages/flow.py")
    assert not page_errors(at)
    model = load_model(tiny_pair_dir)
    pair = analyze_pair(model, source, target)
    found = pair_contributions(model, source, target)
    assert found.tokens == pair.target.tokens and found.encoder.tokens == pair.source.tokens
    graph = route_graph(found, len(pair.target.tokens) - 1, 0.01)
    spec = json.loads(_route_chart(at).proto.spec)
    drawn = sum(len([v for v in t["x"] if v is None]) for t in spec["data"] if t.get("mode") == "lines")
    assert drawn == len(graph.edges)
    dotted = {t["name"] for t in spec["data"] if t.get("mode") == "lines" and t["line"].get("dash") == "dot"}
    crosses = [e for e in graph.edges if e.kind == "cross"]
    assert dotted == {f"cross, head {e.top_head}" for e in crosses}
    clickable = {t["name"]: set(t.get("customdata", [])) for t in spec["data"] if t.get("mode") == "markers"}
    assert clickable["edges"] == {edge_id(e) for e in graph.edges}
    box = _detail_box(at)
    assert len(box.options) == 1 + len(graph.edges) + len(graph.nodes)
    assert crosses and any(e.source[0] == "encoder_embedding" for e in graph.edges)  # across, down to the source
    edge = max(crosses, key=lambda e: e.weight)
    box.set_value(edge_id(edge)).run()
    assert not page_errors(at)
    layer, query, key = edge.target[1], edge.target[2], edge.source[2]
    assert f"What head {edge.top_head} writes at decoder position {query} from source token {key}" in _said(at)
    assert "the tokens it raises and lowers most" in _said(at)
    (row,) = json.loads(at.get("plotly_chart")[-1].proto.spec)["data"]
    # the row drawn is the cross-attention weights the model returns (output_attentions, in analyze_pair)
    np.testing.assert_allclose(_numbers(row["y"]), pair.cross_attentions[layer, edge.top_head, query], atol=1e-6)
    assert view_query(at.session_state)["item"] == edge_id(edge)
    _detail_box(at).set_value(f"block:{found.num_layers - 1}:{len(pair.target.tokens) - 1}").run()
    assert not page_errors(at) and "Logit lens" in _said(at)
    # an MLP node of either stack, picked from the list, lists its top neurons: the shares by hand from hooks on a
    # plain model (each neuron's activation times its row of the output map, proximity to the map's output)
    plain = plain_mlps(tiny_pair_dir, list(pair.source.input_ids), list(pair.target.input_ids))
    for kind, stack in (("mlp", "decoder"), ("encoder_mlp", "encoder")):
        node = max((n for n in graph.nodes if n[0] == kind), key=lambda n: (n[1], n[2]))
        _detail_box(at).set_value(node_id(node)).run()
        assert not page_errors(at) and "Top neurons" in _said(at)
        seen = plain[(stack, node[1])]
        y, rows = seen["out"][node[2]].double().numpy(), seen["map"].weight.detach().double().T.numpy()
        near = np.maximum(0, np.abs(y).sum() - np.abs(y[None] - seen["in"][node[2]].double().numpy()[:, None] * rows).sum(-1))
        shares = near / near.sum()
        table = at.dataframe[-1].value
        assert list(table.columns[:3]) == ["neuron", "activation", "share"] and len(table) == 8
        assert shares[int(table["neuron"].iloc[0])] == pytest.approx(shares.max(), abs=1e-4)  # the top neuron
        np.testing.assert_allclose(table["share"], shares[table["neuron"].to_numpy()], rtol=2e-4, atol=2e-5)
        assert ("raises most" in table.columns) == (stack == "decoder")  # the encoder is not read by the unembedding
    _detail_box(at).set_value(edge_id(next(e for e in graph.edges if e.kind == "mlp"))).run()  # an MLP edge: the same
    assert not page_errors(at) and "Top neurons" in _said(at)
