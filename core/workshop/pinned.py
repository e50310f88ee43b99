"""Figures pinned to a slide deck, kept where every replica and a restarted server find them: beside the workshop
rooms, in the store ``EXPLORER_ROOM_STORE`` names (``settings.load_room_settings``): a SQLite file of its own next to
the rooms' file (``pinned-figures.sqlite3``), or the same Redis server (keys ``explorer:pinned:*``).

A value is the figure's Plotly JSON, its numbers as CSV and its sentence, stored as one JSON text (never pickle), under
a key of the model and the view's canonical link (``ui.deck``). Bounded:

| variable | meaning | default |
| --- | --- | --- |
| ``EXPLORER_PIN_FIGURE_MB`` | the most one pinned figure (JSON + CSV + sentence, UTF-8) may take; a bigger one is refused | 8 |
| ``EXPLORER_PIN_STORE_MB`` | the most all pinned figures take together; past it the oldest stored are deleted first | 256 |
| ``EXPLORER_PIN_IDLE_DAYS`` | days without being pinned or read after which a pinned figure is deleted | 30 |

A pinned figure holds the text it was drawn from, so it does not outlive its use: as a workshop room is deleted after
its idle hours (``settings``), a pinned figure nobody pinned or read for ``EXPLORER_PIN_IDLE_DAYS`` is gone (a deck
whose figure has gone draws it again from the view's link, ``ui.view_figures``). Every put deletes the figures idle
past it, and a get does not return one.

No Streamlit here.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import redis

from core.workshop.settings import RoomSettings, RoomSettingsError, positive_number

PINNED_FILE = "pinned-figures.sqlite3"
MB = 1_000_000
DEFAULT_FIGURE_MB, DEFAULT_TOTAL_MB, DEFAULT_IDLE_DAYS = 8, 256, 30
DAY = 86_400
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
    idle_seconds: float = DEFAULT_IDLE_DAYS * DAY


def pin_limits(environ: Mapping[str, str] | None = None) -> PinLimits:
    """``EXPLORER_PIN_FIGURE_MB``, ``EXPLORER_PIN_STORE_MB`` and ``EXPLORER_PIN_IDLE_DAYS`` from ``environ`` (default
    ``os.environ``)."""
    environ = os.environ if environ is None else environ

    def setting(name: str, default: float, what: str) -> float:
        return positive_number(name, (environ.get(name) or "").strip() or str(default), float, what)

    figure = int(setting("EXPLORER_PIN_FIGURE_MB", DEFAULT_FIGURE_MB, "a number of megabytes") * MB)
    total = int(setting("EXPLORER_PIN_STORE_MB", DEFAULT_TOTAL_MB, "a number of megabytes") * MB)
    return PinLimits(min(figure, total), total, setting("EXPLORER_PIN_IDLE_DAYS", DEFAULT_IDLE_DAYS, "a number of days") * DAY)


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
    """``put`` a pinned figure (``STORED``, or ``TOO_BIG`` past ``limits.figure_bytes``), ``get`` it back or None (also
    once it has been idle for ``limits.idle_seconds``). ``now``: the time in seconds since the epoch (default: the
    clock's); a put or a get makes the figure used at ``now``."""

    limits: PinLimits

    def put(self, key: tuple[str, str], figure_json: str, table_csv: str, sentence: str, *,
            now: float | None = None) -> str:
        value = packed(figure_json, table_csv, sentence)
        size = len(value.encode("utf-8"))
        if size > self.limits.figure_bytes:
            return TOO_BIG
        self._put(store_key(*key), value, size, time.time() if now is None else now)
        return STORED

    def get(self, key: tuple[str, str], *, now: float | None = None) -> StoredFigure | None:
        return unpacked(self._get(store_key(*key), time.time() if now is None else now))

    def _put(self, name: str, value: str, size: int, now: float) -> None:
        raise NotImplementedError

    def _get(self, name: str, now: float) -> str | None:
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
                   "seq INTEGER NOT NULL, used REAL NOT NULL DEFAULT 0, value TEXT NOT NULL)")
        if "used" not in [column[1] for column in db.execute("PRAGMA table_info(pinned)")]:  # a file of an older app
            db.execute("ALTER TABLE pinned ADD COLUMN used REAL NOT NULL DEFAULT 0")
            db.execute("UPDATE pinned SET used = ?", (time.time(),))  # their idle time starts now
        db.execute("CREATE INDEX IF NOT EXISTS pinned_by_seq ON pinned(seq, size)")
        db.execute("CREATE INDEX IF NOT EXISTS pinned_by_use ON pinned(used)")

    def _connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
        return db

    def _put(self, name: str, value: str, size: int, now: float) -> None:
        db = self._connection()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("DELETE FROM pinned WHERE used < ?", (now - self.limits.idle_seconds,))
            db.execute("INSERT OR REPLACE INTO pinned (name, value, size, used, seq) "
                       "VALUES (?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM pinned))", (name, value, size, now))
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

    def _get(self, name: str, now: float) -> str | None:
        db = self._connection()
        rows = db.execute("UPDATE pinned SET used = ? WHERE name = ? AND used >= ? RETURNING value",
                          (now, name, now - self.limits.idle_seconds)).fetchall()
        if not rows:
            db.execute("DELETE FROM pinned WHERE name = ?", (name,))  # idle past the limit, or missing already
        return rows[0][0] if rows else None

    def total_bytes(self) -> int:
        return self._connection().execute("SELECT COALESCE(SUM(size), 0) FROM pinned").fetchone()[0]

    def close_store(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None


# KEYS: values hash, sizes hash, order zset, total, counter, use zset (seconds). One atomic step each.
# DELETE: a Lua function that deletes a figure from every key.
DELETE = """
local function delete(name)
  redis.call('DECRBY', KEYS[4], redis.call('HGET', KEYS[2], name) or 0)
  redis.call('HDEL', KEYS[1], name)
  redis.call('HDEL', KEYS[2], name)
  redis.call('ZREM', KEYS[3], name)
  redis.call('ZREM', KEYS[6], name)
end
"""
# PUT (ARGV: name, value, size, cap, now, idle seconds): delete the figures idle past the limit, store, then delete
# the oldest stored (never the one just stored) while the total is over the cap.
PUT = DELETE + """
for _, idle in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', '(' .. (tonumber(ARGV[5]) - tonumber(ARGV[6])))) do
  delete(idle)
end
local old = redis.call('HGET', KEYS[2], ARGV[1])
if old then redis.call('DECRBY', KEYS[4], old) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[5]), ARGV[1])
redis.call('ZADD', KEYS[6], ARGV[5], ARGV[1])
local total = redis.call('INCRBY', KEYS[4], ARGV[3])
while total > tonumber(ARGV[4]) do
  local oldest = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if not oldest or oldest == ARGV[1] then break end
  delete(oldest)
  total = tonumber(redis.call('GET', KEYS[4]))
end
return total
"""
# GET (ARGV: name, now, idle seconds): the value, made used now; nil (and the figure deleted) once idle past the limit.
GET = DELETE + """
local used = redis.call('ZSCORE', KEYS[6], ARGV[1])
if not used then return nil end
if tonumber(used) < tonumber(ARGV[2]) - tonumber(ARGV[3]) then
  delete(ARGV[1])
  return nil
end
redis.call('ZADD', KEYS[6], ARGV[2], ARGV[1])
return redis.call('HGET', KEYS[1], ARGV[1])
"""
# ADOPT (ARGV: now): figures stored by an older app, without a use time, are used now (their idle time starts).
ADOPT = """
for _, name in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  if not redis.call('ZSCORE', KEYS[6], name) then redis.call('ZADD', KEYS[6], ARGV[1], name) end
end
"""
REDIS_KEYS = [f"explorer:pinned:{part}" for part in ("values", "sizes", "order", "total", "next", "used")]


class RedisPinnedStore(PinnedStore):
    """The same, in Redis: every replica behind nginx reads and writes the one server; each put is one Lua script."""

    def __init__(self, url: str, limits: PinLimits) -> None:
        self.url, self.limits = url, limits
        self.redis = redis.Redis.from_url(url, decode_responses=True, socket_timeout=5, health_check_interval=30,
                                          retry_on_timeout=True)
        self._put_script, self._get_script = self.redis.register_script(PUT), self.redis.register_script(GET)
        self.redis.register_script(ADOPT)(keys=REDIS_KEYS, args=[time.time()])

    def _put(self, name: str, value: str, size: int, now: float) -> None:
        self._put_script(keys=REDIS_KEYS, args=[name, value, size, self.limits.total_bytes, now, self.limits.idle_seconds])

    def _get(self, name: str, now: float) -> str | None:
        return self._get_script(keys=REDIS_KEYS, args=[name, now, self.limits.idle_seconds])

    def total_bytes(self) -> int:
        return int(self.redis.get(REDIS_KEYS[3]) or 0)

    def close_store(self) -> None:
        self.redis.close()


def open_pinned_store(settings: RoomSettings, limits: PinLimits) -> PinnedStore:
    """The pinned figures' store beside the rooms ``settings`` name."""
    if settings.store.startswith("sqlite:///"):
        return SQLitePinnedStore(Path(settings.store.removeprefix("sqlite:///")).parent / PINNED_FILE, limits)
    return RedisPinnedStore(settings.store, limits)
