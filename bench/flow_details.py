"""The Information flow page's details on SmolLM2-135M-Instruct, a 32-token prompt: what a click on an edge or a node
costs once the recorded pass and its contributions are cached (issue 39's target: ≤ 0.3 s), and the tour step's
summary of the route; each the median of five runs, with the machine's load while it ran."""

from __future__ import annotations

import os
import statistics
import time

PROMPT = ("The capital of France is the city of Paris, and the capital of Italy is the city of Rome. So then, "
          "the capital of Spain is the city of")


def _median_s(run, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times), 3)


def main() -> dict:
    # imported here: `python -m bench` lists every benchmark without loading torch
    from core.causal.flow import contributions_of, route_graph
    from core.causal.flow_details import decode, head_write, route_summary, top_neurons
    from core.causal.flow_stack import TraceStack
    from core.causal.unembedding import lens_logits, top_tokens, written_logits
    from core.model.models import load_model
    from core.model.trace import record
    from core.outputs.predictions import load_language_model

    model = load_model("SmolLM2-135M-Instruct")
    lm = load_language_model(model)
    ids = model.tokenizer(PROMPT)["input_ids"]
    recorded = TraceStack(record(model, PROMPT))
    contributions = contributions_of(recorded, [str(i) for i in ids])
    last = len(ids) - 1
    graph = route_graph(contributions, last)
    edge = max((e for e in graph.edges if e.kind == "attention" and e.source[2] != e.target[2]), key=lambda e: e.weight)
    mlp = next(n for n in graph.nodes if n[0] == "mlp")
    final = recorded.residual_post(recorded.num_layers - 1)[last]
    load_before = os.getloadavg()[0]

    def click_edge():  # the head's attention row and what it wrote from the key, through the unembedding
        _, layer, query = edge.target
        recorded.attention(layer, [edge.top_head])
        written = written_logits(lm, head_write(recorded, layer, query, edge.source[2], edge.top_head), final)
        top_tokens(lm, written, 5), top_tokens(lm, written, 5, lowest=True)

    def click_mlp():  # the logit lens is not drawn for an MLP node: its write and its top neurons
        _, layer, p = mlp
        written_logits(lm, recorded.block(layer).mlp_update[p], final)
        neurons = top_neurons(model, recorded, layer, p, 8)
        written = written_logits(lm, neurons.terms, final)  # [k, V] in one pass, as the page does
        decode(lm, written.argmax(axis=1)), decode(lm, written.argmin(axis=1))

    def click_node():  # a representation: its logit lens and what the block before it wrote
        lens_logits(lm, recorded.residual_post(mlp[1])[mlp[2]])
        written_logits(lm, recorded.block(mlp[1]).mlp_update[mlp[2]], final)

    figures = {"tokens": len(ids), "edges": len(graph.edges), "edge_click_s": _median_s(click_edge),
               "mlp_node_click_s": _median_s(click_mlp), "node_click_s": _median_s(click_node),
               "route_summary_s": _median_s(lambda: route_summary(graph)),
               "load_average_1min": [round(load_before, 1), round(os.getloadavg()[0], 1)], "cores": os.cpu_count()}
    print(figures)
    return figures
