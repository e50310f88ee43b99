"""The loaded models of this process, the run key of a computation, and the model turn.

A model name becomes a model in one place (``model_and_run``): loaded once per name and content (``loaded_model``), its
language-model head once per name (``language_model_of``, which raises the cached ``NoLanguageModelHead`` of a checkpoint
without one), and every computation on it waits for its turn (``model_turn``), first come, first served.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections import deque
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import streamlit as st

from core.model.models import LoadedModel, load_model
from core.model.run import Ablation, Run
from core.outputs.predictions import NoLanguageModelHead, load_language_model

log = logging.getLogger(__name__)

MAX_MODELS = 3
MAX_LANGUAGE_MODELS = 2


class FirstComeFirstServed:
    """A re-entrant lock granted in arrival order (``threading.Lock`` wakes waiters in no set order).

    Around every model run: one forward pass at a time uses all of torch's threads instead of
    many sessions' passes splitting (and oversubscribing) the cores, and a page that asked first
    is answered first instead of every session finishing together at the end.
    """

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._queue: deque[int] = deque()
        self._owner: int | None = None
        self._depth = 0

    def held(self) -> bool:
        """Whether the calling thread holds the lock."""
        return self._owner == threading.get_ident()

    def waiting(self) -> int:
        """How many threads wait for the lock."""
        with self._condition:
            return len(self._queue)

    @contextmanager
    def turn(self):
        me = threading.get_ident()
        with self._condition:
            if self._owner == me:  # a model run inside a model run (e.g. analysis inside a derived result)
                self._depth += 1
            else:
                self._queue.append(me)
                self._condition.wait_for(lambda: self._owner is None and self._queue[0] == me)
                self._queue.popleft()
                self._owner, self._depth = me, 1
        try:
            yield
        finally:
            with self._condition:
                self._depth -= 1
                if self._depth == 0:
                    self._owner = None
                    self._condition.notify_all()


MODEL_RUNS = FirstComeFirstServed()


def model_turn():
    """Context manager: wait for this process's turn to run a model (first come, first served)."""
    return MODEL_RUNS.turn()


def model_signature(name: str) -> tuple:
    """What identifies the content of model ``name``: for a local folder, every file's name, size and
    modification time (config, weights, tokenizer); ``()`` for a hub id or the bundled model."""
    folder = Path(name).expanduser()
    if not folder.is_dir():
        return ()
    return tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.iterdir()) if p.is_file())


_SIGNATURES: dict[str, tuple] = {}  # the content each model name was last loaded from, in this process
_CONTENT_CHANGED: list = []  # callbacks(name) run when a model folder's content changed (the store's forget)
_LOADED: set[str] = set()  # names load_once has loaded in this process


def _content_changed(name: str) -> None:
    """Tell every ``on_content_change`` callback that model ``name``'s results are stale."""
    for callback in _CONTENT_CHANGED:
        callback(name)


def on_content_change(callback) -> None:
    """Call ``callback(name)`` whenever model folder ``name`` is found changed on disk, or model ``name`` is loaded
    again after ``load_once`` let it go (``ui.store`` drops its results there); registered once per callback."""
    if callback not in _CONTENT_CHANGED:
        _CONTENT_CHANGED.append(callback)


def loaded_model(name: str) -> LoadedModel:
    """One ``LoadedModel`` per name and content: a folder saved again (new config or weights) loads
    again, and every cached result of the old content is dropped."""
    return model_and_run(name)[0]


def model_and_run(name: str, texts: tuple[str, ...] = (), max_tokens: int | None = None,
                  ablation: tuple | Ablation | None = None) -> tuple[LoadedModel, Run]:
    """Model ``name`` (loaded once per name and content) and the ``Run`` of ``texts`` through it: the one place a
    model name becomes a model. ``ablation``: ``(heads, method)`` from ``ui.ablation.knockout()`` (or an
    ``Ablation``), None for the plain run."""
    run = run_of(name, texts, max_tokens, ablation)
    return load_once(name, run.revision), run


def run_of(name: str, texts: str | tuple[str, ...] = (), max_tokens: int | None = None,
           ablation: tuple | Ablation | None = None) -> Run:
    """The ``Run`` of ``texts`` (one text or a tuple) through model ``name``, without loading it; its ``revision`` is
    the model's content (``model_signature``), and a folder whose content changed since the last run drops the old
    content's results."""
    signature = model_signature(name)
    if _SIGNATURES.get(name, signature) != signature:
        log.info("model folder %s changed on disk: loading it again", name)
        _content_changed(name)
        language_model_load.clear()  # a model cache: Streamlit's caches cannot drop entries by argument
    _SIGNATURES[name] = signature
    if ablation is not None and not isinstance(ablation, Ablation):
        ablation = Ablation.of(*ablation)
    return Run(name, (texts,) if isinstance(texts, str) else tuple(texts), max_tokens, ablation, signature)


@st.cache_resource(max_entries=MAX_MODELS, show_spinner=False)
def load_once(name: str, signature: tuple) -> LoadedModel:
    """``core.model.models.load_model(name)``, once per name and content (``signature``)."""
    started = time.perf_counter()
    model = load_model(name)
    log.info("loaded model %s in %.1f s", name, time.perf_counter() - started)
    if name in _LOADED:  # pushed out of this cache and loaded again: the results kept for the old object (a trace
        _content_changed(name)  # calls its blocks again) would read a model that is gone
    _LOADED.add(name)
    freeze_long_lived()
    return model


def freeze_long_lived() -> None:
    """Put every object alive now (imported libraries, loaded models, compiled UMAP) out of the cyclic garbage
    collector's reach (``gc.freeze``). Streamlit runs a full collection after every script run; without this
    it walks these ~650,000 objects each time, 0.25-0.4 CPU-s per run, most of a page view's cost.

    Garbage present now would be kept for good, so it is collected first, except while the collector is off:
    that is start-up (``ui.warmup``), where every object is still young, so even a young-generation pass would
    walk all ~800,000 of them (0.3 s) to find a few hundred bytes of garbage. Otherwise the first time only the
    young generations (instant), later (another model chosen while pages have run) a full collection, 0.2-0.4 s
    on top of a load that takes seconds. Frozen objects are still freed by reference counting."""
    if gc.isenabled():
        gc.collect(1 if gc.get_freeze_count() == 0 else 2)
    gc.freeze()


class LanguageModelLoad(NamedTuple):
    """What loading a model's language-model head gave: the model, or the sentence saying it has none."""

    model: object | None
    no_head: str | None


@st.cache_resource(max_entries=MAX_LANGUAGE_MODELS, show_spinner=False)
def language_model_load(name: str) -> LanguageModelLoad:
    """``core.outputs.predictions.load_language_model`` of model ``name``, once per name: having no head is a property
    of the checkpoint, so that answer is cached too instead of loading the weights again on every rerun. Read it
    through ``language_model_of`` (which raises it) or ``has_language_model``."""
    try:
        return LanguageModelLoad(load_language_model(loaded_model(name)), None)
    except NoLanguageModelHead as err:
        return LanguageModelLoad(None, str(err))


def language_model_of(name: str):
    """Model ``name`` with its language-model head (loaded once); raises ``NoLanguageModelHead`` (a
    ``UserFacingError``: its message is a sentence) when the checkpoint has none."""
    load = language_model_load(name)
    if load.no_head is not None:
        raise NoLanguageModelHead(load.no_head)
    return load.model


def has_language_model(name: str) -> bool:
    """Whether model ``name`` has a trained language-model head (``language_model_of`` would not raise)."""
    return language_model_load(name).no_head is None
