"""The one store of computed results: every cached result of the app, keyed by a ``core.model.run.Run`` and the view's own
parameters, on a shelf of its kind, each shelf bounded in entries and in bytes.

    results().get_or_compute("rollouts", run, (), compute)        # computed once per run, shared by every session
    results().get_or_compute("qk-maps", run, (layer, head, rotary, method), compute)

``SHELVES`` is the one table of kinds and their budgets (a shelf is a ``ui.bounded_cache.BoundedCache``: least
recently used first out, a value larger than its shelf is returned but not kept, each key computed once even when
many sessions ask at the same time). A key is ``(run, params)``: ``run`` must be a ``Run`` (a ``TypeError``
otherwise) and ``params`` a tuple of small hashable values (never arrays). One invalidation rule:
``forget(model)`` drops every shelf's results of that model's runs (``forget()`` drops everything).
Plain Python but for ``results()``, the process-wide instance (``st.cache_resource``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import streamlit as st

from core.model.run import Run
from ui.bounded_cache import BoundedCache, nbytes_of

MB = 1_000_000


@dataclass(frozen=True)
class Shelf:
    """A shelf's budget: at most ``entries`` results and ``bytes`` bytes (as ``size_of`` counts them)."""

    entries: int
    bytes: int
    size_of: Callable[[Any], int] = nbytes_of


def _pair_bytes(pair) -> int:
    """A ``PairAnalysis``'s arrays: its cross-attention and both sides' ``Analysis`` (with their recorded passes)."""
    return (nbytes_of(pair.cross_attentions) + nbytes_of(pair.source) + nbytes_of(pair.target)
            + nbytes_of(getattr(pair, "recorded", None)))


# kind: its budget. One 512-token analysis of a 12-layer, 12-head model holds about 150 MB of attention; a 512-token
# norm-weighted result of it is as large. An analysis keeps its recorded pass (queries, keys, values, inputs), counted
# in its bytes: all-MiniLM-L6-v2 81 MB + 19 MB at 512 tokens; SmolLM2-135M-Instruct 27 MB + 27 MB at 128 tokens.
SHELVES: dict[str, Shelf] = {
    # one text (ui/cache.py)
    "analyses": Shelf(64, 1500 * MB),
    "ablated-analyses": Shelf(32, 1500 * MB),
    "rollouts": Shelf(16, 600 * MB),
    "norm-weighted": Shelf(16, 600 * MB),
    "attention-views": Shelf(8, 600 * MB),  # the matrices a view shows, per (source, special tokens, word level)
    "queries-keys": Shelf(8, 600 * MB),
    "head-stats": Shelf(64, 50 * MB),
    "predictions": Shelf(64, 400 * MB),
    "model-facts": Shelf(32, 50 * MB),
    "reference-anisotropy": Shelf(3, 1 * MB),  # one per model: a pass over 8 reference sentences
    "figures": Shelf(64, 400 * MB),  # figures and the tables under them, per figure name and options
    # long texts on the attention page (ui/long_attention.py): each head pooled to screen pixels, zooms, thumbnails
    "long-pooled-heads": Shelf(600, 400 * MB),
    "long-labels": Shelf(16, 10 * MB),
    "long-zooms": Shelf(64, 100 * MB),
    "long-thumbnails": Shelf(16, 200 * MB),
    # a corpus (ui/cache.py); 500 documents × 13 hidden states × 768 dims × 4 poolings (float32) is about 80 MB
    "corpus-head-stats": Shelf(64, 50 * MB),
    "corpus-embeddings": Shelf(8, 400 * MB),
    "contextuality": Shelf(8, 400 * MB),
    # causal tools (ui/cache_effects.py)
    "head-importance": Shelf(32, 400 * MB),
    "target-changes": Shelf(32, 400 * MB),
    "attributions": Shelf(32, 400 * MB),
    "logit-lens": Shelf(32, 400 * MB),
    # language-model views: generations, patching, attribution, induction (ui/lm_views.py, ui/lm_writer.py)
    "lm-tools": Shelf(64, 200 * MB),
    # information flow (ui/cache_flow.py): a recorded pass (with its MLP neurons) and its contributions, both counted;
    # for 128 tokens of SmolLM2 the contributions alone are about 18 MB
    "flows": Shelf(8, 400 * MB),
    # needle in a haystack (ui/cache_needle.py)
    "needle-haystacks": Shelf(32, 200 * MB),
    "needle-scores": Shelf(32, 200 * MB),
    "needle-answers": Shelf(32, 200 * MB),
    "needle-knock-outs": Shelf(32, 200 * MB),
    "needle-grid-cells": Shelf(512, 10 * MB),  # one small AnswerSuccess per (depth, length) cell (ui/needle_grid.py)
    # long context (ui/cache_long_context.py): a profile holds [L, H, T] float32 sink shares, 30 × 9 × 8,192 × 4 bytes
    # = 8.8 MB for SmolLM2 at 8,192 tokens
    "long-context": Shelf(16, 200 * MB),
    "long-context-haystacks": Shelf(16, 10 * MB),
    # queries and keys over a corpus (ui/cache_qk.py): SmolLM2, one layer of the 3,000-token sample corpus is 9 MB;
    # MiniLM, all 6 layers, 55 MB
    "qk-corpus": Shelf(6, 600 * MB),
    "qk-maps": Shelf(64, 200 * MB),
    "qk-agreements": Shelf(64, 1 * MB),
    "qk-thumbnails": Shelf(16, 200 * MB),
    # senses (ui/cache_senses.py): 2,000 occurrences × 13 layers × 768 dims (float32) is about 80 MB
    "occurrences": Shelf(8, 400 * MB),
    "projections": Shelf(128, 400 * MB),
    "fitted-projections": Shelf(16, 400 * MB),  # keeps the fitted estimator: fewer entries
    "aligned-projections": Shelf(128, 400 * MB),
    "separations": Shelf(128, 50 * MB),
    "separation-intervals": Shelf(128, 50 * MB),
    # encoder-decoders (ui/cache_seq2seq.py)
    "generated-targets": Shelf(64, 10 * MB),
    "pairs": Shelf(16, 1000 * MB, _pair_bytes),
    "pair-views": Shelf(8, 600 * MB),
}


class Store:
    """Results keyed by ``(run, params)`` on the shelves of ``shelves`` (kind: ``Shelf``)."""

    def __init__(self, shelves: dict[str, Shelf]):
        self._shelves = {kind: BoundedCache(s.entries, s.bytes, s.size_of) for kind, s in shelves.items()}

    def shelf(self, kind: str) -> BoundedCache:
        """The ``BoundedCache`` of ``kind`` (a ``KeyError`` naming the known kinds for an unknown one)."""
        try:
            return self._shelves[kind]
        except KeyError:
            raise KeyError(f"no shelf {kind!r} in the store; add it to ui.store.SHELVES ({', '.join(self._shelves)})") from None

    @staticmethod
    def key(run: Run, params: tuple = ()) -> tuple[Run, tuple]:
        """The key of ``run``'s result with the view's own ``params``."""
        if not isinstance(run, Run):
            raise TypeError(f"a stored result is keyed by a core.model.run.Run, got {type(run).__name__}")
        if not isinstance(params, tuple):
            raise TypeError(f"a stored result's params are a tuple, got {type(params).__name__}")
        return run, params

    def get_or_compute(self, kind: str, run: Run, params: tuple, compute: Callable[[], Any]) -> Any:
        """The result of ``kind`` for ``run`` and ``params``: ``compute()`` the first time, the kept value after."""
        return self.shelf(kind).get_or_compute(self.key(run, params), compute)

    def get(self, kind: str, run: Run, params: tuple = ()) -> Any:
        """The kept result, or None (never computes)."""
        return self.shelf(kind).get(self.key(run, params))

    def put(self, kind: str, run: Run, params: tuple, value: Any) -> None:
        self.shelf(kind).put(self.key(run, params), value)

    def discard(self, kind: str, run: Run, params: tuple = ()) -> None:
        """Drop one result (the next ``get_or_compute`` computes it again)."""
        key = self.key(run, params)
        self.shelf(kind).discard(lambda k: k == key)

    def forget(self, model: str | None = None) -> None:
        """Drop every result of ``model``'s runs, on every shelf; every result when ``model`` is None."""
        for shelf in self._shelves.values():
            if model is None:
                shelf.clear()
            else:
                shelf.discard(lambda key: key[0].model == model)

    def computed(self, kind: str) -> int:
        """How many results of ``kind`` were computed (for tests and the load benchmark)."""
        return self.shelf(kind).computed

    def __len__(self) -> int:
        return sum(len(shelf) for shelf in self._shelves.values())

    @property
    def total_bytes(self) -> int:
        return sum(shelf.total_bytes for shelf in self._shelves.values())

    @property
    def max_entries(self) -> int:
        return sum(shelf.max_entries for shelf in self._shelves.values())

    @property
    def max_bytes(self) -> int:
        return sum(shelf.max_bytes for shelf in self._shelves.values())


@st.cache_resource(show_spinner=False)
def results() -> Store:
    """The process-wide store: shared by every session (its results are read-only)."""
    return Store(SHELVES)


def cached(kind: str, run: Run, compute: Callable[[], Any], params: tuple = ()) -> Any:
    """``results().get_or_compute(kind, run, params, compute)``."""
    return results().get_or_compute(kind, run, params, compute)


def stored(kind: str, run: Run, params: tuple = ()) -> Any:
    """``results().get(kind, run, params)``: the kept result or None."""
    return results().get(kind, run, params)
