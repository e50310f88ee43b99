"""The cache of the Information flow page: one recorded pass and its contributions per (model, text, token limit)."""

from __future__ import annotations

from typing import NamedTuple

from core.flow import Contributions, contributions_of
from core.recorded_pass import RecordedPass, record_pass
from ui.cache import bounded_store, cached_analysis, cached_model, model_turn, read_only

# Entries are few because only the contributions' arrays are counted in bytes (about 18 MB for 128 tokens of
# SmolLM2); the recorded pass's tensors (about as much again) are not.
FLOW_MAX_TOKENS = 128  # every (head, key) term's contributions, 128 tokens of SmolLM2: 3.5 CPU-s, 5.6 s at load 8 (bench flow)
MAX_FLOWS = 8
MAX_FLOW_BYTES = 400_000_000


class Flow(NamedTuple):
    """The recorded pass the detail views read and the contributions the graph is built from."""

    recorded: RecordedPass
    contributions: Contributions


def cached_flow(model_name: str, text: str, max_tokens: int | None, progress=None) -> Flow:
    """``core.flow.contributions_of`` of one recorded pass over ``text``; ``progress(done, total)`` after each layer,
    only when it is computed. Raises ``UnsupportedArchitecture`` (a sentence) for a model the app cannot record."""
    def compute() -> Flow:
        model = cached_model(model_name)
        analysis = cached_analysis(model_name, text, max_tokens)
        with model_turn():
            recorded = record_pass(model, list(analysis.input_ids), neurons=True)  # the MLP detail's neurons
            found = contributions_of(recorded, analysis.tokens, progress)
        for array in (found.attention, found.attention_residual, found.mlp, found.mlp_residual):
            read_only(array)
        return Flow(recorded, found)

    return bounded_store("flows", MAX_FLOWS, MAX_FLOW_BYTES).get_or_compute((model_name, text, max_tokens), compute)
