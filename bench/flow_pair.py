"""Information flow through an encoder-decoder (issue 39, item 4; ``core.causal.flow_pair``): the pair's trace (one
recorded pass), read block by block, and every node's contributions for a 32-token source and a 16-token target, the
route graph and its figure redrawn, and the
detail of a cross-attention edge (the head's write through the decoder's final norm and the unembedding). No
encoder-decoder is bundled, so the models are random T5s built here (``tests.model_factory``): the tests' tiny one and
one of t5-small's size (6 + 6 layers, 8 heads, hidden 512, feed-forward 1,024); the machine's load beside them."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch

from bench.flow import CPU_SECONDS, TEXT, fastest_of
from core.causal.flow import route_graph
from core.causal.flow_pair import decoder_logits, pair_contributions_of, pair_pass
from core.model.models import load_model
from core.model.trace import record
from tests.model_factory import build_tiny_t5
from viz.flow_pair import PairLayout, pair_route_figure

SOURCE_TOKENS, TARGET_TOKENS = 32, 16
SIZES = {"tiny": {}, "t5_small_size": {"layers": 6, "heads": 8, "hidden": 512}}


def main() -> dict:
    figures: dict = {"torch_threads": torch.get_num_threads(), "cores": os.cpu_count(),
                     "source_tokens": SOURCE_TOKENS, "target_tokens": TARGET_TOKENS}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as folder:
        for size, shape in SIZES.items():
            model = load_model(str(build_tiny_t5(Path(folder) / size, **shape)))
            ids = model.tokenizer(TEXT, add_special_tokens=False)["input_ids"]  # each text then ends with </s>
            source, target = (model.tokenizer.decode(ids[:n - 1]) for n in (SOURCE_TOKENS, TARGET_TOKENS))

            def run(source=source, target=target, model=model):
                trace = record(model, (source, target))
                recorded = pair_pass(trace, model)
                return recorded, pair_contributions_of(recorded, list(trace.tokens("encoder").tokens),
                                                       list(trace.tokens("decoder").tokens))

            seconds, (recorded, found) = fastest_of(run, name=f"contributions_{size}")
            figures[f"contributions_{size}_s"] = round(seconds, 3)
            loads.append(os.getloadavg()[0])
            figures[f"tokens_{size}"] = (recorded.encoder.num_tokens, found.num_positions)  # (source, decoder) as read
            layout = PairLayout([str(i) for i in range(recorded.encoder.num_tokens)], [str(i) for i in range(found.num_positions)],
                                found.encoder.num_layers, found.num_layers)
            seconds, graph = fastest_of(lambda found=found, layout=layout: _redraw(found, layout), name=f"redraw_{size}")
            figures[f"redraw_{size}_s"], figures[f"edges_{size}_threshold_0.04"] = round(seconds, 3), len(graph.edges)
            cross = max((e for e in graph.edges if e.kind == "cross"), key=lambda e: e.weight, default=None)
            if cross is not None:
                layer, query, key, head = cross.target[1], cross.target[2], cross.source[2], cross.top_head
                seconds, _ = fastest_of(lambda: decoder_logits(recorded, recorded.cross_write(layer, query, key, head), query),
                                   name=f"cross_edge_detail_{size}")
                figures[f"cross_edge_detail_{size}_s"] = round(seconds, 3)
    loads.append(os.getloadavg()[0])
    figures["load_average_1min"] = [round(load, 1) for load in loads]
    figures["cpu_s"] = dict(CPU_SECONDS)
    print(figures)
    return figures


def _redraw(found, layout: PairLayout):
    """The route into the last decoder position at the default threshold and its figure; returns the graph."""
    graph = route_graph(found, found.num_positions - 1)
    pair_route_figure(graph, layout, title="route")
    return graph
