"""The one store of computed results, and the declaration every kind of result is made with.

A kind of result is declared once (``ui/results.py`` holds every declaration)::

    rollouts = Result("rollouts", lambda model, run: rollout(analyses.at(run)), entries=16, megabytes=600, turn=False)

and read with the model's name, its text(s) and the view's options, or with a ``Run``::

    rollouts(model_name, text, max_tokens=limit, ablation=knocked_out)    # computed once, then kept
    rollouts.at(run)                                                      # the same, from a Run
    rollouts.peek(model_name, text, max_tokens=limit)                     # the kept result or None: never computes

From that one declaration come the shelf (its name and budget: a ``ui.bounded_cache.BoundedCache``, least recently
used first out, bounded in entries and bytes; a value larger than its shelf is returned but not kept; each key computed
once even when many sessions ask at the same time), the key (``(run, options)``: the ``core.model.run.Run`` of the model,
texts, token limit and knock-out, and the view's small hashable options, never arrays), what ``compute`` is given (the
loaded model, the model with its language-model head, or nothing: ``reads``), the model turn (``turn=True``: the
computation runs the model, so it waits for its turn, first come first served, ``ui.models.model_turn``) and read-only
results (arrays in the value are frozen: a result is shared by every session). Keyword arguments a call adds (a
``progress`` callback) reach ``compute`` but not the key.

The turn rule, which keeps many sessions free of deadlock: a computation declared ``turn=True`` may read only results
declared ``turn=True`` (it holds the turn, so no other thread can be computing one of those); one declared
``turn=False`` runs outside the turn and may read any result. ``Result.at`` raises ``RuntimeError`` when a computation
holding the turn asks for a missing ``turn=False`` result.

One invalidation rule: ``store().forget(model)`` drops every shelf's results of that model (``ui.models`` calls it
when a model folder changed on disk), ``forget()`` all of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import streamlit as st

from core.model.run import Ablation, Run
from ui.bounded_cache import BoundedCache, nbytes_of
from ui.models import MODEL_RUNS, language_model_of, loaded_model, model_turn, on_content_change, run_of

MB = 1_000_000

Reads = Literal["model", "language model", "nothing"]


class Result:
    """One declared kind of cached result (see the module docstring)."""

    def __init__(self, kind: str, compute: Callable[..., Any], *, entries: int, megabytes: float,
                 reads: Reads = "model", turn: bool = True, size_of: Callable[[Any], int] = nbytes_of):
        """``compute(model, run, *options, **extra)``: ``model`` is what ``reads`` names (``LoadedModel``, the
        ``core.outputs.predictions.LanguageModel``, or None); ``entries`` and ``megabytes`` bound the shelf."""
        if kind in DECLARED:
            raise ValueError(f"a result of kind {kind!r} is declared twice")
        if reads not in ("model", "language model", "nothing"):
            raise ValueError(f"reads must be 'model', 'language model' or 'nothing', not {reads!r}")
        self.kind, self.compute, self.reads, self.turn = kind, compute, reads, turn
        self.entries, self.max_bytes, self.size_of = entries, int(megabytes * MB), size_of
        DECLARED[kind] = self

    def __repr__(self) -> str:
        return f"Result({self.kind!r})"

    def __call__(self, model_name: str, texts: str | tuple[str, ...] = (), *options, max_tokens: int | None = None,
                 ablation: tuple | Ablation | None = None, **extra) -> Any:
        """The result for model ``model_name``, ``texts`` (one text or a tuple), ``options``, the token limit and
        the knock-out: computed the first time, kept after. ``extra`` keyword arguments reach ``compute`` only."""
        return self.at(run_of(model_name, texts, max_tokens, ablation), *options, **extra)

    def at(self, run: Run, *options, **extra) -> Any:
        """The result for ``run`` and ``options`` (computed the first time, kept after)."""
        shelf = store().shelf(self)
        key = Store.key(run, options)
        if MODEL_RUNS.held() and not self.turn:
            found = shelf.get(key)
            if found is None:
                raise RuntimeError(f"{self!r} (turn=False) asked for inside the model turn: read it before the turn, "
                                   "or declare it turn=True")
            return found
        return self._kept(shelf, key, run, options, extra)()

    def later(self, run: Run, *options, **extra) -> Callable[[], Any]:
        """A call that computes (and keeps) the result for ``run`` and ``options`` in another thread, where the store
        itself cannot be looked up: the shelf is found now. For work done ahead of a click (``ui.ahead``)."""
        return self._kept(store().shelf(self), Store.key(run, options), run, options, extra)

    def _kept(self, shelf, key, run: Run, options: tuple, extra: dict) -> Callable[[], Any]:
        """A call returning the result kept on ``shelf`` under ``key``, computed and kept the first time."""
        return lambda: shelf.get_or_compute(key, lambda: self._compute(run, options, extra))

    def peek(self, model_name: str, texts: str | tuple[str, ...] = (), *options, max_tokens: int | None = None,
             ablation: tuple | Ablation | None = None) -> Any:
        """The kept result, or None when it has not been computed (never computes)."""
        return self.peek_at(run_of(model_name, texts, max_tokens, ablation), *options)

    def peek_at(self, run: Run, *options) -> Any:
        return store().shelf(self).get(Store.key(run, options))

    def keep_at(self, run: Run, options: tuple, value: Any) -> None:
        """Keep ``value`` as the result for ``run`` and ``options`` (a result computed in pieces, e.g. a generation
        written a chunk at a time)."""
        store().shelf(self).put(Store.key(run, options), frozen(value))

    def forget_at(self, run: Run, *options) -> None:
        """Drop one result (the next call computes it again)."""
        key = Store.key(run, options)
        store().shelf(self).discard(lambda k: k == key)

    def computed(self) -> int:
        """How many results of this kind were computed in this process (for tests and the load benchmark)."""
        return store().shelf(self).computed

    def _compute(self, run: Run, options: tuple, extra: dict) -> Any:
        model = {"model": lambda: loaded_model(run.model), "language model": lambda: language_model_of(run.model),
                 "nothing": lambda: None}[self.reads]()
        if not self.turn:
            return frozen(self.compute(model, run, *options, **extra))
        with model_turn():
            return frozen(self.compute(model, run, *options, **extra))


DECLARED: dict[str, Result] = {}  # kind: its declaration (every one is made in ui/results.py)


def frozen(value: Any) -> Any:
    """``value`` with every NumPy array in it, or in its fields (tuples, named tuples, dataclasses, dicts: one level
    down), made read-only: a kept result is shared by every session."""
    if isinstance(value, np.ndarray):
        value.setflags(write=False)
        return value
    if isinstance(value, tuple | list):
        parts = list(value)
    elif isinstance(value, dict):
        parts = list(value.values())
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        parts = [getattr(value, f.name) for f in dataclasses.fields(value)]
    else:
        return value
    for part in parts:
        if isinstance(part, np.ndarray):
            part.setflags(write=False)
    return value


class Store:
    """The shelves of every declared ``Result``, made the first time each is used."""

    def __init__(self) -> None:
        self._shelves: dict[str, BoundedCache] = {}

    def shelf(self, result: Result) -> BoundedCache:
        """The ``BoundedCache`` of ``result``'s kind."""
        shelf = self._shelves.get(result.kind)
        if shelf is None:
            shelf = self._shelves.setdefault(result.kind,
                                             BoundedCache(result.entries, result.max_bytes, result.size_of))
        return shelf

    @staticmethod
    def key(run: Run, options: tuple = ()) -> tuple[Run, tuple]:
        """The key of ``run``'s result with the view's own ``options``."""
        if not isinstance(run, Run):
            raise TypeError(f"a stored result is keyed by a core.model.run.Run, got {type(run).__name__}")
        if not isinstance(options, tuple):
            raise TypeError(f"a stored result's options are a tuple, got {type(options).__name__}")
        return run, options

    def forget(self, model: str | None = None) -> None:
        """Drop every result of ``model``'s runs, on every shelf; every result when ``model`` is None."""
        for shelf in self._shelves.values():
            if model is None:
                shelf.clear()
            else:
                shelf.discard(lambda key: key[0].model == model)

    def __len__(self) -> int:
        return sum(len(shelf) for shelf in self._shelves.values())

    @property
    def total_bytes(self) -> int:
        return sum(shelf.total_bytes for shelf in self._shelves.values())


@st.cache_resource(show_spinner=False)
def store() -> Store:
    """The process-wide store: shared by every session (its results are read-only)."""
    store = Store()
    on_content_change(store.forget)
    return store
