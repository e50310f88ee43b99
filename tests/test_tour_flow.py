"""The language-model tour's information-flow step (ui/tour_language_model.py, its wording in viz/tour_sentences.py;
issue 39 item 5) through AppTest on a tiny random
Llama: its sentences name the carriers, layers and heads that a route rebuilt here from the contributions gives, its
link opens the flow page on the same prompt and token, and two close candidates are not ranked."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from core.causal.flow import Edge, RouteGraph, contributions_of, layer_runs
from core.causal.flow_details import ROUTE_MARGIN, route_summary
from core.model.models import load_model
from core.model.tokens import decoded_tokens, quoted_token
from core.model.trace import record
from core.outputs.predictions import load_language_model
from tests.lm_factory import build_tiny_llama_lm
from tests.test_app import open_app, page_errors
from ui.tour_language_model import FLOW_PROMPT
from viz.tour_sentences import flow_sentences

TOUR = "app_pages/tour.py"


@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory):
    return str(build_tiny_llama_lm(tmp_path_factory.mktemp("tour-flow") / "llama"))


def _said(at) -> str:
    return " ".join(m.value for m in at.markdown).replace("\\", "")  # markdown escapes, as the reader sees it


def _route_by_hand(c, position: int, threshold: float):
    """The cross-position attention edges of the route into ``position``'s last representation, searched here from
    the contribution arrays: ``[(layer, key, query, weight, head shares [H])]``."""
    layers = c.attention.shape[0]
    stack, seen, kept = [("block", layers - 1, position)], set(), []
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        kind, layer, p = node
        below = ("block", layer - 1) if layer > 0 else ("embedding", -1)
        if kind == "block":
            for source, weight in ((("mlp", layer, p), c.mlp[layer, p]), (("attention", layer, p),
                                                                           c.mlp_residual[layer, p])):
                if weight > threshold:
                    stack.append(source)
        elif kind == "mlp" and c.mlp[layer, p] > threshold:
            stack.append(("attention", layer, p))
        elif kind == "attention":
            if c.attention_residual[layer, p] > threshold:
                stack.append((*below, p))
            for key in range(c.attention.shape[2]):
                weight = c.attention[layer, p, key].sum()
                if weight > threshold:
                    stack.append((*below, key))
                    if key != p:
                        kept.append((layer, key, p, float(weight), c.attention[layer, p, key]))
    return kept


def test_the_flow_step_names_the_carrier_layers_and_heads_of_the_route(lm_dir):
    # a random tiny model moves little between positions: at the default threshold (0.04) nothing, at 0.01 some
    threshold = 0.01
    at = open_app({"model": lm_dir, "step": "6", "threshold": str(threshold)}, page=TOUR)
    assert not page_errors(at), page_errors(at)
    assert at.header[0].value.startswith("6 · Information flow")
    assert at.text_input(key="tour.prompt").value == FLOW_PROMPT
    said = _said(at)

    model = load_model(lm_dir)
    ids = model.tokenizer(FLOW_PROMPT)["input_ids"]
    c = contributions_of(record(model, FLOW_PROMPT), ["x"] * len(ids))
    last = len(ids) - 1
    edges = _route_by_hand(c, last, threshold)
    labels = decoded_tokens(model.tokenizer, ids)

    def q(p: int) -> str:
        return f"{quoted_token(labels[p])} (token {p})"

    totals: dict[int, float] = {}
    for _, key, _, weight, _ in edges:
        totals[key] = totals.get(key, 0.0) + weight
    assert edges, "the tiny model's route should move information between positions at this threshold"
    order = sorted(totals, key=lambda k: -totals[k])
    top = order[0]
    if len(order) > 1 and totals[order[1]] >= totals[top] - ROUTE_MARGIN:
        assert "carry about as much, within 0.02 of each other" in said and q(top) in said and q(order[1]) in said
    else:
        count = sum(1 for e in edges if e[1] == top)
        layers = sorted({e[0] for e in edges if e[1] == top})
        assert (f"those from {q(top)} carry the most: {count} edge{'s' if count != 1 else ''} in "
                f"{layer_runs(layers)}, whose shares add up to {totals[top]:.2f} (each a share") in said, said
    # the heads: each head's largest share on one of those edges, the largest three
    best: dict[tuple[int, int], tuple[float, int, int]] = {}
    for layer, key, query, _, heads in edges:
        for head, share in enumerate(heads):
            if share > best.get((layer, head), (-1.0,))[0]:
                best[(layer, head)] = (float(share), key, query)
    (layer, head), (share, key, query) = max(best.items(), key=lambda item: item[1][0])
    assert (f"carried by layer {layer}, head {head} ({share:.0%} of what reaches {q(query)} after layer {layer}'s "
            f"attention, from {q(key)})") in said, said
    # the model's top guess, from a plainly loaded model
    plain = AutoModelForCausalLM.from_pretrained(lm_dir).eval()
    with torch.no_grad():
        probabilities = plain(torch.tensor([ids])).logits[0, -1].double().softmax(-1)
    guess = int(probabilities.argmax())
    assert f"its top guess is {quoted_token(decoded_tokens(model.tokenizer, [guess])[0])} at" in said
    (link,) = [b.proto.url for b in at.get("link_button")]
    query = {key: values[0] for key, values in parse_qs(urlsplit(link).query).items()}
    assert urlsplit(link).path == "flow" and query["text"] == FLOW_PROMPT and query["token"] == str(last)
    assert float(query["threshold"]) == threshold

    assert not _route_by_hand(c, last, 0.04)
    at = open_app({"model": lm_dir, "step": "6"}, page=TOUR)
    assert not page_errors(at), page_errors(at)
    assert (f"At this threshold no attention edge brings information from another position into {q(last)}"
            in _said(at)), _said(at)


def test_two_carriers_within_the_margin_are_not_ranked():
    # by hand: token 0 sends 0.30 + 0.20 = 0.50 (layers 0 and 1), token 1 sends 0.49 (layer 1): within 0.02
    edges = (Edge(("embedding", -1, 0), ("attention", 0, 2), 0.30, "attention", (0.10, 0.20)),
             Edge(("block", 0, 0), ("attention", 1, 2), 0.20, "attention", (0.05, 0.15)),
             Edge(("block", 0, 1), ("attention", 1, 2), 0.49, "attention", (0.19, 0.30)))
    graph = RouteGraph(2, 0.04, edges)
    said = flow_sentences(graph, route_summary(graph), ["a", "b", "c"], "m", "d", 0.5).replace("\\", "")
    assert "those from “a” (token 0) and “b” (token 1) carry about as much, within 0.02 of each other: 0.50 " \
           "(layers 0–1) and 0.49 (layer 1)." in said
    # heads: layer 1 head 1 carries 0.30 of one edge, layer 0 head 1 0.20, layer 1 head 0 0.19 (its best edge)
    assert "carried by layer 1, head 1 (30% of what reaches “c” (token 2) after layer 1's attention, from “b” " \
           "(token 1)), " in said
    assert "layer 0, head 1 (20% of what reaches “c” (token 2) after layer 0's attention, from “a” (token 0)) and " \
           "layer 1, head 0 (19% of what reaches “c” (token 2) after layer 1's attention, from “b” (token 1))." in said
    assert "order says little" not in said  # 0.30 against 0.20: ranked
    close = RouteGraph(2, 0.04, edges[:1] + (Edge(("block", 0, 1), ("attention", 1, 2), 0.21, "attention",
                                                  (0.01, 0.195)),))
    assert "the first two differ by less than 0.02, so their order says little" in flow_sentences(
        close, route_summary(close), ["a", "b", "c"], "m", "d", 0.5)
    assert np.isclose(route_summary(graph).carriers[0][1], 0.5)


@pytest.mark.integration
def test_on_smollm2_the_step_follows_paris_back_to_its_carriers(bundled_lm):
    at = open_app({"model": "SmolLM2-135M-Instruct", "track": "lm", "step": "6"}, page=TOUR)
    assert not page_errors(at), page_errors(at)
    said = _said(at)
    ids = bundled_lm.tokenizer(FLOW_PROMPT)["input_ids"]
    with torch.no_grad():
        probabilities = load_language_model(bundled_lm).model(torch.tensor([ids])).logits[0, -1].double().softmax(-1)
    assert bundled_lm.tokenizer.decode([int(probabilities.argmax())]) == " Paris"
    assert (f"**How did SmolLM2-135M-Instruct get to “·Paris”?** After the {len(ids)} tokens of the prompt, ending with "
            f"“·of”, its top guess is “·Paris” at {float(probabilities.max()):.1%}") in said, said
    c = contributions_of(record(bundled_lm, FLOW_PROMPT), ["x"] * len(ids))
    totals: dict[int, float] = {}
    for _, key, _, weight, _ in _route_by_hand(c, len(ids) - 1, 0.04):
        totals[key] = totals.get(key, 0.0) + weight
    top = max(totals, key=totals.get)
    assert f"(token {top}) carry the most" in said and f"add up to {totals[top]:.2f}" in said, said


def test_the_flow_step_escapes_a_hostile_prompt_and_draws_a_slide(lm_dir):
    hostile = "The <img src=x onerror=alert(1)> capital of **France** is $x$ the city of"
    at = open_app({"model": lm_dir, "step": "6", "threshold": "0.01", "prompt": hostile, "present": "true"},
                  page=TOUR)
    assert not page_errors(at), page_errors(at)
    for m in at.markdown:  # nothing typed becomes HTML, emphasis or math
        assert "<img" not in m.value and "**France**" not in m.value and "$x$" not in m.value
    (chart,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith("-tour-flow")]  # not the start-up's
    spec = json.loads(chart.proto.spec)
    assert spec["layout"]["width"] * 9 == spec["layout"]["height"] * 16  # a 16:9 slide
    assert "&lt;" in chart.proto.spec and not re.findall(r"<(?!br>|b>|/b>)", chart.proto.spec)  # only our own tags
