"""Information flow on SmolLM2-135M-Instruct (issue 39's figures): ``core.causal.flow.contributions`` (one recorded pass and
every node's contributions) at 32 and 128 tokens, the route graph redrawn for a new threshold and token
(``core.causal.flow.route_graph`` and ``viz.flow.route_figure``), and the detail of an edge and of a node (a head's terms at
one query through the unembedding, a node's logit lens); with torch's threads and the machine's load beside them."""

from __future__ import annotations

import os
import time

import torch

from core.causal.flow import contributions, head_terms, route_graph
from core.causal.flow_stack import TraceStack
from core.causal.unembedding import lens_logits, top_tokens, written_logits
from core.model.models import load_model
from core.model.trace import record
from core.outputs.predictions import load_language_model
from viz.flow import route_figure

# a plain English text, cut to the lengths measured; the first sentence is the app's example prompt
TEXT = ("The capital of France is Paris. It lies on the Seine, and its museums, its cafés and its old bridges draw "
        "visitors from every country. The capital of Italy is Rome, an old city built on seven hills, where the "
        "river Tiber runs past ruins, churches and squares full of fountains. Berlin, the capital of Germany, was "
        "divided by a wall for almost thirty years; today trains cross the city from east to west in a few minutes, "
        "and the old border is a park where children ride bicycles on summer evenings. Madrid is the capital of "
        "Spain, high on a plateau in the middle of the country, with hot summers and cold winters.")
REPEATS = 3


CPU_SECONDS: dict[str, float] = {}  # the process's CPU time of the fastest run, by the figure's name


def fastest_of(run, repeats: int = REPEATS, name: str | None = None) -> tuple[float, object]:
    """The fastest of ``repeats`` runs of ``run()`` in seconds (the machine is shared), and its result; with
    ``name``, that run's CPU seconds are kept in ``CPU_SECONDS`` (what a quiet machine would take on one thread)."""
    times, result = [], None
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        result = run()
        times.append((time.perf_counter() - start, time.process_time() - cpu))
    wall, cpu = min(times)
    if name is not None:
        CPU_SECONDS[name] = round(cpu, 2)
    return wall, result


def _redraw(found, labels: list[str], position: int, threshold: float) -> float:
    """Seconds to build the route graph for ``position`` and ``threshold`` and its figure (the fastest run)."""
    return fastest_of(lambda: route_figure(route_graph(found, position, threshold), labels, found.num_layers,
                                      title="route"), name=f"redraw_{len(labels)}_{position}_{threshold}")[0]


def _details(lm, recorded, layer: int, query: int, head: int) -> tuple[float, float]:
    """Seconds for an edge's detail (the head's write at ``query`` through the unembedding, its attention row) and a
    node's (its logit lens), as the page computes them."""
    final = recorded.residual_post(recorded.num_layers - 1)[query]

    def edge_detail():
        write = head_terms(recorded, layer, slice(query, query + 1))[0, :, head].sum(0)
        logits = written_logits(lm, write, final)
        return top_tokens(lm, logits), top_tokens(lm, logits, lowest=True), recorded.attention(layer, [head])

    def node_detail():
        return top_tokens(lm, lens_logits(lm, recorded.block(layer).mid[query]))

    return fastest_of(edge_detail, name="edge_detail")[0], fastest_of(node_detail, name="node_detail")[0]


def main() -> dict:
    model = load_model("SmolLM2-135M-Instruct")
    lm = load_language_model(model)
    figures: dict = {"torch_threads": torch.get_num_threads(), "cores": os.cpu_count()}
    loads = [os.getloadavg()[0]]
    for length in (32, 128):
        ids = model.tokenizer(TEXT)["input_ids"][:length]
        text = model.tokenizer.decode(ids)
        assert len(model.tokenizer(text)["input_ids"]) == length
        updates: list[int] = []
        repeats = REPEATS if length <= 32 else 2
        seconds, found = fastest_of(lambda text=text, updates=updates: contributions(
            model, text, progress=lambda done, _total: updates.append(done)), repeats, f"contributions_{length}_tokens")
        figures[f"contributions_{length}_tokens_s"] = round(seconds, 2)
        figures[f"progress_updates_{length}_tokens"] = len(updates) // repeats
        loads.append(os.getloadavg()[0])
        labels = [str(i) for i in range(length)]
        for threshold in (0.04, 0.1):
            figures[f"redraw_{length}_tokens_threshold_{threshold}_s"] = round(
                _redraw(found, labels, length - 1, threshold), 3)
        figures[f"redraw_{length}_tokens_other_token_s"] = round(_redraw(found, labels, length // 2, 0.04), 3)
        figures[f"edges_{length}_tokens_threshold_0.04"] = len(route_graph(found, length - 1, 0.04).edges)
        if length == 32:
            recorded = TraceStack(record(model, text))  # the trace the page keeps for its details
            edge, node = _details(lm, recorded, recorded.num_layers // 2, length - 1, 0)
            figures["edge_detail_32_tokens_s"], figures["node_detail_32_tokens_s"] = round(edge, 3), round(node, 3)
    loads.append(os.getloadavg()[0])
    figures["load_average_1min"] = [round(load, 1) for load in loads]
    figures["cpu_s"] = dict(CPU_SECONDS)
    print(figures)
    return figures
