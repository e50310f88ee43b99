"""The information-flow route read as sentences (core.causal.flow_reading, issue 50 items 4, 9 and 12): a sum of
shares of different nodes said to be one, an attention sink named as one, a node whose parts cancel said to have no
measurable share, and every node's shares in a sentence. Received weights and proximities come from a plainly loaded
model (eager attention, hidden states from transformers) and numpy by hand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from core.causal.flow import Contributions, Edge, RouteGraph, contributions_of, route_graph
from core.causal.flow_reading import SINK_WEIGHT, Measures, measures_of, node_sentence, route_sentence
from core.causal.flow_stack import TraceStack
from core.model.models import load_model
from core.model.trace import record
from tests.lm_factory import build_tiny_llama_lm

LABELS = ["<bos>", "b", "c", "d"]


def _graph() -> RouteGraph:
    """Into token 3: token 0 sends three edges (0.60 + 0.50 + 0.40 = 1.50, each into a different node), token 1 one."""
    edges = (
        Edge(("block", 0, 0), ("attention", 1, 3), 0.60, "attention", (0.6,)),
        Edge(("block", 1, 0), ("attention", 2, 3), 0.50, "attention", (0.5,)),
        Edge(("block", 2, 0), ("attention", 3, 3), 0.40, "attention", (0.4,)),
        Edge(("block", 0, 1), ("attention", 1, 3), 0.10, "attention", (0.1,)),
    )
    return RouteGraph(3, 0.04, edges)


def test_a_sum_of_shares_of_different_nodes_is_said_to_be_one():
    """Item 4: "whose shares add up to 1.72" read as more than everything; the sentence says what the sum is."""
    sentence = route_sentence(_graph(), LABELS)
    assert "3 edges in layers 1–3, whose shares add up to 1.50" in sentence
    assert "each a share of a different node's inputs, so their sum can pass 1; the largest is 0.60" in sentence
    assert "sink" not in sentence


def test_a_carrier_that_is_an_attention_sink_is_named_as_one():
    """Item 9: Gemma 3's route named "<bos>" the main carrier without saying it is the attention sink."""
    received = np.array([0.52, 0.03, 0.02, 0.04])
    sentence = route_sentence(_graph(), LABELS, received)
    assert "“<bos>” is this text's attention sink" in sentence and "give it 52% of their attention weight" in sentence
    assert "(the other tokens 3% on average)" in sentence  # (0.03 + 0.02 + 0.04) / 3
    below = received.copy()
    below[0] = SINK_WEIGHT - 0.01
    assert "sink" not in route_sentence(_graph(), LABELS, below)


def _contributions(mlp: float, residual: float) -> Contributions:
    attention = np.zeros((1, 2, 2, 1), np.float32)
    attention[0, 1, 0, 0] = 0.25
    return Contributions(attention, np.array([[1.0, 0.75]], np.float32), np.array([[mlp, mlp]], np.float32),
                         np.array([[residual, residual]], np.float32), ["a", "b"])


def test_a_node_whose_parts_cancel_has_no_measurable_share():
    """Item 4: where the MLP and the residual both have proximity 0, the page said "MLP 0 %, residual 100 %"."""
    unmeasured = Measures(np.zeros(2), np.zeros((1, 2), bool), np.ones((1, 2), bool))
    said = node_sentence(_contributions(0.0, 1.0), unmeasured, ("mlp", 0, 1), ["a", "b"])
    assert "no share can be measured here" in said and "%" not in said
    measured = Measures(np.zeros(2), np.zeros((1, 2), bool), np.zeros((1, 2), bool))
    said = node_sentence(_contributions(0.3, 0.7), measured, ("block", 0, 1), ["a", "b"])
    assert "Layer 0's MLP brings 30.0% of hidden state 1" in said and "the other 70.0%" in said
    said = node_sentence(_contributions(0.3, 0.7), measured, ("attention", 0, 1), ["a", "b"])
    assert "carries 75.0% and the heads bring the other 25.0%; the most from “a” (token 0) 25.0%" in said
    assert "through head 0" in said


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    folder = build_tiny_llama_lm(tmp_path_factory.mktemp("flow-reading") / "llama")
    return load_model(str(folder)), AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()


def _by_hand(plain, ids: list[int]) -> tuple[np.ndarray, list[np.ndarray]]:
    """(received [T]: each key's mean weight over heads, queries after it and layers, from the eager attentions;
    the hidden states [T, D] per layer boundary) from the plainly loaded model."""
    with torch.no_grad():
        out = plain(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    t = len(ids)
    received = np.zeros(t)
    for weights in out.attentions:
        mean = weights[0].double().numpy().mean(axis=0)  # [q, k]
        received += [mean[k + 1:, k].mean() if k < t - 1 else 0.0 for k in range(t)]
    return received / len(out.attentions), [h[0].double().numpy() for h in out.hidden_states]


def test_received_weights_and_unmeasured_nodes_against_the_plain_model(tiny_llama):
    model, plain = tiny_llama
    text = "the cat sat on the mat and the dog"
    ids = model.tokenizer(text)["input_ids"]
    recorded = TraceStack(record(model, text))
    found = contributions_of(recorded, ["x"] * len(ids))
    measures = measures_of(recorded, found)
    received, hidden = _by_hand(plain, ids)
    np.testing.assert_allclose(measures.received, received, atol=1e-5)
    # an MLP node is unmeasured exactly where both parts' proximities are 0 (by hand from the hidden states)
    for layer in range(recorded.num_layers):
        mid = recorded.block(layer).mid.double().numpy()
        post = hidden[layer + 1] if layer + 1 < len(hidden) - 1 else recorded.residual_post(layer).double().numpy()
        size = np.abs(post).sum(-1)
        cancel = (size - np.abs(post - mid).sum(-1) <= 1e-6) & (size - np.abs(mid).sum(-1) <= 1e-6)
        assert (measures.unmeasured_mlp[layer] == cancel).all()


class _Cancelling(TraceStack):
    """A trace's stack whose layer-0 MLP at token 1 writes minus the residual: y = 0, both proximities 0."""

    def block(self, layer):
        found = super().block(layer)
        if layer:
            return found
        post = found.post.clone()
        post[1] = 0.0
        return dataclasses.replace(found, post=post, mlp_update=post - found.mid)


def test_a_cancelling_mlp_is_found_unmeasured(tiny_llama):
    model, _ = tiny_llama
    ids = model.tokenizer("the cat sat")["input_ids"]
    recorded = _Cancelling(record(model, "the cat sat"))
    found = contributions_of(recorded, ["x"] * len(ids))
    measures = measures_of(recorded, found)
    assert measures.unmeasured_mlp[0, 1] and measures.unmeasured_mlp.sum() == 1
    assert found.mlp_residual[0, 1] == 1  # the convention the sentence must not present as a measurement
    said = node_sentence(found, measures, ("block", 0, 1), ["a", "b", "c", "d"][:len(ids)])
    assert "no share can be measured" in said


@pytest.mark.integration
@pytest.mark.parametrize("which", ["bundled_lm", "bundled_gemma"])
def test_the_first_token_of_smollm2_and_gemma3_is_named_the_sink_with_its_weight(which, request):
    """Item 9 on the models on screen: the route's main carrier is the first token, and the sentence says it is the
    attention sink with the weight the plain model's eager attentions give it."""
    model = request.getfixturevalue(which)
    plain = AutoModelForCausalLM.from_pretrained(model.source, dtype=torch.float32, attn_implementation="eager").eval()
    text = "The capital of France is Paris. The capital of Italy is"
    ids = model.tokenizer(text)["input_ids"]
    recorded = record(model, text)
    labels = [str(i) for i in range(len(ids))]
    labels[0] = "first"
    found = contributions_of(recorded, labels)
    received, _ = _by_hand(plain, ids)
    sentence = route_sentence(route_graph(found, len(ids) - 1), labels, measures_of(recorded, found).received)
    assert "those from “first” (token 0) carry the most" in sentence
    assert received[0] >= SINK_WEIGHT
    assert "“first” is this text's attention sink" in sentence and f"give it {received[0]:.0%}" in sentence
