"""Rooms in one SQLite file (standard library), the default for one server: WAL mode, so the projector's reads never
wait for a learner's write; each check-and-insert is one ``BEGIN IMMEDIATE`` transaction, so limits hold across
threads and processes sharing the file. A connection per thread (``sqlite3`` connections are not shared)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from core.workshop.rooms import CLOSED, FULL, LOCKED, MISSING, TOO_FAST, Entry, Limits, Room, RoomStore

SCHEMA = """
CREATE TABLE IF NOT EXISTS rooms (
    code TEXT PRIMARY KEY, model TEXT NOT NULL, word TEXT NOT NULL, view TEXT NOT NULL, secret_hash TEXT NOT NULL,
    created REAL NOT NULL, touched REAL NOT NULL,
    locked INTEGER NOT NULL DEFAULT 0, closed INTEGER NOT NULL DEFAULT 0, revealed INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT, code TEXT NOT NULL REFERENCES rooms(code) ON DELETE CASCADE,
    learner TEXT NOT NULL, text TEXT NOT NULL, created REAL NOT NULL, hidden INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS entries_by_room ON entries(code, id);
CREATE INDEX IF NOT EXISTS entries_by_learner ON entries(code, learner, created);
"""
ROOM_COLUMNS = "code, model, word, view, created, touched, locked, closed, revealed"


class SQLiteRoomStore(RoomStore):
    def __init__(self, path: str | Path, idle_seconds: float) -> None:
        self.path, self.idle_seconds = Path(path), idle_seconds
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connection() as db:
            db.executescript(SCHEMA)

    def _connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)  # autocommit; transactions by hand
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a committed entry survives a killed process
            self._local.db = db
        return db

    def journal_mode(self) -> str:
        return self._connection().execute("PRAGMA journal_mode").fetchone()[0]

    def _write(self):
        """A transaction that takes the write lock at once (``BEGIN IMMEDIATE``)."""
        return _Immediate(self._connection())

    def _expire(self, db: sqlite3.Connection, now: float) -> None:
        db.execute("DELETE FROM rooms WHERE touched < ?", (now - self.idle_seconds,))

    def create(self, room: Room, secret_hash: str, max_rooms: int) -> bool:
        with self._write() as db:
            self._expire(db, room.created)
            if db.execute("SELECT COUNT(*) FROM rooms").fetchone()[0] >= max_rooms:
                return False
            db.execute(f"INSERT INTO rooms ({ROOM_COLUMNS}, secret_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (room.code, room.model, room.word, room.view, room.created, room.touched, room.locked,
                        room.closed, room.revealed, secret_hash))
            return True

    def get(self, code: str, now: float) -> Room | None:
        row = self._connection().execute(f"SELECT {ROOM_COLUMNS} FROM rooms WHERE code = ?", (code,)).fetchone()
        if row is None:
            return None
        room = Room(*row[:6], *(bool(v) for v in row[6:]))
        if room.touched < now - self.idle_seconds:
            with self._write() as db:
                db.execute("DELETE FROM rooms WHERE code = ? AND touched < ?", (code, now - self.idle_seconds))
            return None
        return room

    def secret_hash(self, code: str) -> str | None:
        row = self._connection().execute("SELECT secret_hash FROM rooms WHERE code = ?", (code,)).fetchone()
        return None if row is None else row[0]

    def add(self, code: str, learner: str, text: str, now: float, limits: Limits) -> Entry | str:
        with self._write() as db:
            row = db.execute("SELECT touched, locked, closed FROM rooms WHERE code = ?", (code,)).fetchone()
            if row is None or row[0] < now - self.idle_seconds:
                return MISSING
            if row[2]:
                return CLOSED
            if row[1]:
                return LOCKED
            if db.execute("SELECT COUNT(*) FROM entries WHERE code = ?", (code,)).fetchone()[0] >= limits.max_entries:
                return FULL
            recent = db.execute("SELECT COUNT(*) FROM entries WHERE code = ? AND learner = ? AND created > ?",
                                (code, learner, now - 60)).fetchone()[0]
            if recent >= limits.per_minute:
                return TOO_FAST
            cursor = db.execute("INSERT INTO entries (code, learner, text, created) VALUES (?, ?, ?, ?)",
                                (code, learner, text, now))
            db.execute("UPDATE rooms SET touched = ? WHERE code = ?", (now, code))
            return Entry(cursor.lastrowid, learner, text, now)

    def entries(self, code: str) -> list[Entry]:
        rows = self._connection().execute(
            "SELECT id, learner, text, created, hidden FROM entries WHERE code = ? ORDER BY id", (code,)).fetchall()
        return [Entry(i, learner, text, created, bool(hidden)) for i, learner, text, created, hidden in rows]

    def set_flags(self, code: str, now: float, **flags: bool) -> None:
        unknown = set(flags) - {"locked", "closed", "revealed"}
        if unknown:
            raise ValueError(f"unknown room flags {sorted(unknown)}")
        with self._write() as db:
            for name, value in flags.items():
                db.execute(f"UPDATE rooms SET {name} = ?, touched = ? WHERE code = ?", (bool(value), now, code))

    def set_hidden(self, code: str, entry_id: int, hidden: bool, now: float) -> None:
        with self._write() as db:
            db.execute("UPDATE entries SET hidden = ? WHERE code = ? AND id = ?", (hidden, code, entry_id))
            db.execute("UPDATE rooms SET touched = ? WHERE code = ?", (now, code))

    def clear(self, code: str, now: float) -> None:
        with self._write() as db:
            db.execute("DELETE FROM entries WHERE code = ?", (code,))
            db.execute("UPDATE rooms SET touched = ? WHERE code = ?", (now, code))

    def live_rooms(self, now: float) -> int:
        with self._write() as db:
            self._expire(db, now)
            return db.execute("SELECT COUNT(*) FROM rooms").fetchone()[0]

    def close_store(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None


class _Immediate:
    """``with _Immediate(db) as db``: BEGIN IMMEDIATE … COMMIT, or ROLLBACK on an exception."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind, value, traceback) -> None:
        self.db.execute("ROLLBACK" if kind else "COMMIT")
