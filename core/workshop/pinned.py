"""Figures pinned to a slide deck, kept where every replica and a restarted server find them: beside the workshop
rooms, in the store ``EXPLORER_ROOM_STORE`` names (``settings.load_room_settings``): a SQLite file of its own next to
the rooms' file (``pinned-figures.sqlite3``), or the same Redis server (keys ``explorer:pinned:*``).

A value is the figure's Plotly JSON, its numbers as CSV and its sentence, stored as one JSON text (never pickle), under
a key of the model and the view's canonical link (``ui.deck``). Bounded:

| variable | meaning | default |
| --- | --- | --- |
| ``EXPLORER_PIN_FIGURE_MB`` | the most one pinned figure (JSON + CSV + sentence, UTF-8) may take; a bigger one is refused | 8 |
| ``EXPLORER_PIN_STORE_MB`` | the most all pinned figures take together; past it the oldest stored are deleted first | 256 |

No Streamlit here.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import redis

from core.workshop.settings import RoomSettings, RoomSettingsError, positive_number

PINNED_FILE = "pinned-figures.sqlite3"
MB = 1_000_000
DEFAULT_FIGURE_MB, DEFAULT_TOTAL_MB = 8, 256
STORED, TOO_BIG = "stored", "too big"
STORE_ERRORS = (OSError, sqlite3.Error, redis.RedisError, RoomSettingsError)  # a store that cannot be reached or read


@dataclass(frozen=True)
class StoredFigure:
    figure_json: str
    table_csv: str
    sentence: str


@dataclass(frozen=True)
class PinLimits:
    figure_bytes: int
    total_bytes: int


def pin_limits(environ: Mapping[str, str] | None = None) -> PinLimits:
    """``EXPLORER_PIN_FIGURE_MB`` and ``EXPLORER_PIN_STORE_MB`` from ``environ`` (default ``os.environ``)."""
    environ = os.environ if environ is None else environ
    values = []
    for name, default in (("EXPLORER_PIN_FIGURE_MB", DEFAULT_FIGURE_MB), ("EXPLORER_PIN_STORE_MB", DEFAULT_TOTAL_MB)):
        text = (environ.get(name) or "").strip() or str(default)
        values.append(int(positive_number(name, text, float, "a number of megabytes") * MB))
    return PinLimits(min(values), values[1])


def store_key(model: str, view_link: str) -> str:
    """The stored name of ``model``'s figure at ``view_link`` (any characters in, 64 hex digits out)."""
    return hashlib.sha256(json.dumps([model, view_link], ensure_ascii=False).encode("utf-8")).hexdigest()


def packed(figure_json: str, table_csv: str, sentence: str) -> str:
    return json.dumps({"figure": figure_json, "table": table_csv, "sentence": sentence}, ensure_ascii=False)


def unpacked(value: str | None) -> StoredFigure | None:
    """The figure of a stored ``value``; None for a missing or unreadable one."""
    if value is None:
        return None
    try:
        fields = json.loads(value)
        return StoredFigure(str(fields["figure"]), str(fields["table"]), str(fields["sentence"]))
    except (ValueError, TypeError, KeyError):
        return None


class PinnedStore:
    """``put`` a pinned figure (``STORED``, or ``TOO_BIG`` past ``limits.figure_bytes``), ``get`` it back or None."""

    limits: PinLimits

    def put(self, key: tuple[str, str], figure_json: str, table_csv: str, sentence: str) -> str:
        value = packed(figure_json, table_csv, sentence)
        size = len(value.encode("utf-8"))
        if size > self.limits.figure_bytes:
            return TOO_BIG
        self._put(store_key(*key), value, size)
        return STORED

    def get(self, key: tuple[str, str]) -> StoredFigure | None:
        return unpacked(self._get(store_key(*key)))

    def _put(self, name: str, value: str, size: int) -> None:
        raise NotImplementedError

    def _get(self, name: str) -> str | None:
        raise NotImplementedError

    def total_bytes(self) -> int:
        raise NotImplementedError

    def close_store(self) -> None:
        raise NotImplementedError


class SQLitePinnedStore(PinnedStore):
    """One table in a SQLite file of its own (WAL; a connection per thread; each put and its evictions one
    ``BEGIN IMMEDIATE`` transaction, so the cap holds across the processes sharing the file)."""

    def __init__(self, path: str | Path, limits: PinLimits) -> None:
        self.path, self.limits = Path(path), limits
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        db = self._connection()  # the value last: sizes and order are read without reading through the values
        db.execute("CREATE TABLE IF NOT EXISTS pinned (name TEXT PRIMARY KEY, size INTEGER NOT NULL, "
                   "seq INTEGER NOT NULL, value TEXT NOT NULL)")
        db.execute("CREATE INDEX IF NOT EXISTS pinned_by_seq ON pinned(seq, size)")

    def _connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
        return db

    def _put(self, name: str, value: str, size: int) -> None:
        db = self._connection()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("INSERT OR REPLACE INTO pinned (name, value, size, seq) "
                       "VALUES (?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM pinned))", (name, value, size))
            total = db.execute("SELECT COALESCE(SUM(size), 0) FROM pinned").fetchone()[0]
            for oldest, taken in db.execute("SELECT name, size FROM pinned ORDER BY seq").fetchall():
                if total <= self.limits.total_bytes or oldest == name:
                    break
                db.execute("DELETE FROM pinned WHERE name = ?", (oldest,))
                total -= taken
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def _get(self, name: str) -> str | None:
        row = self._connection().execute("SELECT value FROM pinned WHERE name = ?", (name,)).fetchone()
        return None if row is None else row[0]

    def total_bytes(self) -> int:
        return self._connection().execute("SELECT COALESCE(SUM(size), 0) FROM pinned").fetchone()[0]

    def close_store(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None


# KEYS: values hash, sizes hash, order zset, total, counter; ARGV: name, value, size, cap. One atomic step: store,
# then delete the oldest stored (never the one just stored) while the total is over the cap.
PUT = """
local old = redis.call('HGET', KEYS[2], ARGV[1])
if old then redis.call('DECRBY', KEYS[4], old) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[5]), ARGV[1])
local total = redis.call('INCRBY', KEYS[4], ARGV[3])
while total > tonumber(ARGV[4]) do
  local oldest = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if not oldest or oldest == ARGV[1] then break end
  total = redis.call('DECRBY', KEYS[4], redis.call('HGET', KEYS[2], oldest) or 0)
  redis.call('HDEL', KEYS[1], oldest)
  redis.call('HDEL', KEYS[2], oldest)
  redis.call('ZREM', KEYS[3], oldest)
end
return total
"""
REDIS_KEYS = [f"explorer:pinned:{part}" for part in ("values", "sizes", "order", "total", "next")]


class RedisPinnedStore(PinnedStore):
    """The same, in Redis: every replica behind nginx reads and writes the one server; each put is one Lua script."""

    def __init__(self, url: str, limits: PinLimits) -> None:
        self.url, self.limits = url, limits
        self.redis = redis.Redis.from_url(url, decode_responses=True, socket_timeout=5, health_check_interval=30,
                                          retry_on_timeout=True)
        self._script = self.redis.register_script(PUT)

    def _put(self, name: str, value: str, size: int) -> None:
        self._script(keys=REDIS_KEYS, args=[name, value, size, self.limits.total_bytes])

    def _get(self, name: str) -> str | None:
        return self.redis.hget(REDIS_KEYS[0], name)

    def total_bytes(self) -> int:
        return int(self.redis.get(REDIS_KEYS[3]) or 0)

    def close_store(self) -> None:
        self.redis.close()


def open_pinned_store(settings: RoomSettings, limits: PinLimits) -> PinnedStore:
    """The pinned figures' store beside the rooms ``settings`` name."""
    if settings.store.startswith("sqlite:///"):
        return SQLitePinnedStore(Path(settings.store.removeprefix("sqlite:///")).parent / PINNED_FILE, limits)
    return RedisPinnedStore(settings.store, limits)
