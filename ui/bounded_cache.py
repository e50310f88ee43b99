"""A thread-safe least-recently-used cache bounded both in entries and in bytes.

Streamlit's own caches bound only the number of entries; one analysis of 512 tokens on a
12 × 12 model holds 150 MB of attention, so the app bounds its big results by size too.
Plain Python (no Streamlit): one instance per process is created in ``ui/cache.py``.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import numpy as np

V = TypeVar("V")


def nbytes_of(value: object) -> int:
    """Bytes held by the NumPy arrays in ``value`` (an array, a dataclass or object of arrays, a tuple or list)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (tuple, list)):
        return sum(nbytes_of(v) for v in value)
    if isinstance(value, dict):
        return sum(nbytes_of(v) for v in value.values())
    fields = getattr(value, "__dict__", None)
    if fields:
        return sum(nbytes_of(v) for v in fields.values() if isinstance(v, (np.ndarray, tuple, list, dict)))
    return 0


_INSTANCES: weakref.WeakSet = weakref.WeakSet()


class BoundedCache(Generic[V]):
    """LRU cache: at most ``max_entries`` values and ``max_bytes`` bytes (by ``size_of``).

    ``get_or_compute`` computes each key once even when several sessions ask at the same
    time (the others wait for it). A value larger than ``max_bytes`` is returned but not kept.
    """

    def __init__(self, max_entries: int, max_bytes: int, size_of: Callable[[V], int] = nbytes_of):
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._size_of = size_of
        self._items: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._key_locks: dict[Hashable, threading.Lock] = {}
        self.computed = 0  # how many values were computed (for tests and the load benchmark)
        _INSTANCES.add(self)

    @staticmethod
    def instances() -> list[BoundedCache]:
        """Every cache of this process (to drop the results of a model whose folder changed)."""
        return list(_INSTANCES)

    def discard(self, predicate: Callable[[Hashable], bool]) -> None:
        """Drop every entry whose key satisfies ``predicate``."""
        with self._lock:
            for key in [key for key in self._items if predicate(key)]:
                self._bytes -= self._items.pop(key)[1]

    def __len__(self) -> int:
        return len(self._items)

    @property
    def total_bytes(self) -> int:
        return self._bytes

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key][0]

    def put(self, key: Hashable, value: V) -> None:
        size = self._size_of(value)
        with self._lock:
            if key in self._items:
                self._bytes -= self._items.pop(key)[1]
            if size > self.max_bytes:
                return
            self._items[key] = (value, size)
            self._bytes += size
            while len(self._items) > self.max_entries or self._bytes > self.max_bytes:
                _, (_, evicted) = self._items.popitem(last=False)
                self._bytes -= evicted

    def get_or_compute(self, key: Hashable, compute: Callable[[], V]) -> V:
        cached = self.get(key)
        if cached is not None:
            return cached
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            cached = self.get(key)
            if cached is not None:
                return cached
            value = compute()
            self.computed += 1
            self.put(key, value)
        with self._lock:
            self._key_locks.pop(key, None)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
