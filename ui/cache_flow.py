"""The cache of the Information flow page: one recorded pass and its contributions per (model, text, token limit), or
per (model, source, target, token limit) for an encoder-decoder."""

from __future__ import annotations

from typing import NamedTuple

from core.causal.flow import Contributions, contributions_of
from core.causal.flow_pair import PairContributions, PairPass, pair_contributions_of, record_pair
from core.causal.flow_reading import Measures, measures_of
from core.model.recorded_pass import RecordedPass, record_pass
from ui.cache import analysis_of, model_and_run, model_turn, read_only
from ui.cache_seq2seq import cached_pair
from ui.store import cached

FLOW_MAX_TOKENS = 128  # every (head, key) term's contributions, 128 tokens of SmolLM2: 3.5 CPU-s, 5.6 s at load 8 (bench flow)


class Flow(NamedTuple):
    """The recorded pass the detail views read, the contributions the graph is built from and what the sentences
    read beyond them (``core.causal.flow_reading.Measures``)."""

    recorded: RecordedPass
    contributions: Contributions
    measures: Measures


def cached_flow(model_name: str, text: str, max_tokens: int | None, progress=None) -> Flow:
    """``core.causal.flow.contributions_of`` of one recorded pass over ``text``; ``progress(done, total)`` after each layer,
    only when it is computed. Raises ``UnsupportedArchitecture`` (a sentence) for a model the app cannot record."""
    model, run = model_and_run(model_name, (text,), max_tokens)

    def compute() -> Flow:
        analysis = analysis_of(model, run)
        with model_turn():
            recorded = record_pass(model, list(analysis.input_ids), neurons=True)  # the MLP detail's neurons
            found = contributions_of(recorded, analysis.tokens, progress)
        for array in (found.attention, found.attention_residual, found.mlp, found.mlp_residual):
            read_only(array)
        with model_turn():
            measures = measures_of(recorded, found)
        return Flow(recorded, found, measures)

    return cached("flows", run, compute)


def flow_with_progress(model_name: str, text: str, max_tokens: int | None, slot) -> Flow:
    """``cached_flow`` with its progress drawn in ``slot`` (an ``st.empty()``), layer by layer; the slot is left
    for the caller to empty."""
    return cached_flow(model_name, text, max_tokens, progress=lambda done, total: slot.progress(
        done / total, text=f"Splitting the updates into their parts: layer {done} of {total}"))


class PairFlow(NamedTuple):
    """An encoder-decoder's recorded pass (``core.causal.flow_pair.PairPass``) and its contributions."""

    recorded: PairPass
    contributions: PairContributions


def cached_pair_flow(model_name: str, source: str, target: str, max_tokens: int | None, progress=None) -> PairFlow:
    """``core.causal.flow_pair`` over the source and target of ``ui.cache_seq2seq.cached_pair`` (its very tokens), per
    (model, source, target, token limit); ``progress(done, total)`` after each layer of either stack, only when it is
    computed. Raises ``UnsupportedArchitecture`` (a sentence) for a model the app cannot take apart."""
    model, run = model_and_run(model_name, (source, target), max_tokens)

    def compute() -> PairFlow:
        pair = cached_pair(model_name, source, target, max_tokens)
        with model_turn():
            recorded = record_pair(model, list(pair.source.input_ids), list(pair.target.input_ids))
            found = pair_contributions_of(recorded, pair.source.tokens, pair.target.tokens, progress)
        for array in (found.attention, found.attention_residual, found.cross_attention, found.cross_residual,
                      found.mlp, found.mlp_residual):
            read_only(array)
        return PairFlow(recorded, found)

    return cached("flows", run, compute, ("pair",))  # the shelf of one-stack flows; a run of two texts, its own key
