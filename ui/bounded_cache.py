"""A thread-safe least-recently-used cache bounded both in entries and in bytes, on ``cachetools``.

Streamlit's own caches bound only the number of entries; one analysis of 512 tokens on a
12 × 12 model holds 150 MB of attention, so the app bounds its big results by size too.
Plain Python (no Streamlit): ``ui/store.py`` makes one per kind of result (its shelves).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import cachetools
import numpy as np
import torch

V = TypeVar("V")


def nbytes_of(value: object) -> int:
    """Bytes held by the NumPy arrays and torch tensors in ``value`` (an array or tensor, a dataclass or object of
    them, nested dataclasses such as ``Analysis.trace`` included, a tuple, list or dict). An object's other
    attributes (a torch module, say) are not followed."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, torch.Tensor):
        return int(value.nelement() * value.element_size())
    if isinstance(value, (tuple, list)):
        return sum(nbytes_of(v) for v in value)
    if isinstance(value, dict):
        return sum(nbytes_of(v) for v in value.values())
    fields = getattr(value, "__dict__", None)
    if fields:
        return sum(nbytes_of(v) for v in fields.values()
                   if isinstance(v, (np.ndarray, torch.Tensor, tuple, list, dict)) or dataclasses.is_dataclass(v))
    return 0


class _EntryBoundedLRU(cachetools.LRUCache):
    """``cachetools.LRUCache`` bounded in bytes (``maxsize`` with ``getsizeof``) and, here, in entries too."""

    def __init__(self, max_entries: int, max_bytes: int, getsizeof: Callable[[object], int]):
        super().__init__(maxsize=max_bytes, getsizeof=getsizeof)
        self.max_entries = max_entries

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        while len(self) > self.max_entries:
            self.popitem()  # the least recently used


class BoundedCache(Generic[V]):
    """LRU cache: at most ``max_entries`` values and ``max_bytes`` bytes (by ``size_of``).

    ``get_or_compute`` computes each key once even when several sessions ask at the same
    time (the others wait for it: ``cachetools.cached`` with a condition). A value larger
    than ``max_bytes`` is returned but not kept. A computation that raises is not cached.
    """

    def __init__(self, max_entries: int, max_bytes: int, size_of: Callable[[V], int] = nbytes_of):
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._items = _EntryBoundedLRU(max_entries, max_bytes, size_of)
        self._lock = threading.RLock()
        self._computing = cachetools.cached(
            self._items, key=lambda key, compute: key, lock=self._lock, condition=threading.Condition(self._lock)
        )(self._compute)
        self.computed = 0  # how many values were computed (for tests and the load benchmark)

    def discard(self, predicate: Callable[[Hashable], bool]) -> None:
        """Drop every entry whose key satisfies ``predicate``."""
        with self._lock:
            for key in [key for key in self._items if predicate(key)]:
                self._items.pop(key, None)

    def _compute(self, key: Hashable, compute: Callable[[], V]) -> V:
        value = compute()
        with self._lock:
            self.computed += 1
        return value

    def __len__(self) -> int:
        return len(self._items)

    @property
    def total_bytes(self) -> int:
        return int(self._items.currsize)

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            return self._items.get(key)

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._items.pop(key, None)
            try:
                self._items[key] = value
            except ValueError:  # larger than the whole budget
                pass

    def get_or_compute(self, key: Hashable, compute: Callable[[], V]) -> V:
        return self._computing(key, compute)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
