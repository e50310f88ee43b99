"""A workshop room: what a room and an entry are, the store interface both back ends implement, and the rules.

A presenter opens a room and gets its code (10 characters from a 31-letter alphabet without 0/O, 1/I/L: 49 bits, from
``secrets``) and a presenter's secret (192 bits); the store keeps only the secret's SHA-256, so reading the store does
not let anyone moderate. Learners send entries (a sentence with the room's word, or a vote for a head, ``L3H5``); the
store checks the limits and the room's state in the same atomic step as it adds the entry, so two replicas cannot
both take the 300th entry. Every sentence a learner or presenter reads about a refusal is written here (``Workshop``).
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import re
import secrets
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

from core.errors import UserFacingError
from core.representations.senses import find_word
from core.workshop.settings import RoomSettings

CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"  # 31 letters, none read as another
CODE_LENGTH = 10  # 31**10 ≈ 2**49.5
VIEWS = {"senses": "Senses map: a sentence with the word", "vote": "Vote: which head attends to the previous token?"}
VOTE = re.compile(r"^L(\d{1,3})H(\d{1,3})$")
# why a store refuses an entry (Store.add), each said by Workshop.submit in a sentence
MISSING, CLOSED, LOCKED, FULL, TOO_FAST = "missing", "closed", "locked", "full", "too fast"


class RoomError(UserFacingError):
    """A room action that cannot be done; the message says why, in a sentence."""


class NotPresenter(RoomError):
    """A moderation asked for without the presenter's secret."""


@dataclass(frozen=True)
class Room:
    code: str
    model: str
    word: str
    view: str  # a key of VIEWS
    created: float
    touched: float  # the last entry or moderation (the idle clock)
    locked: bool = False
    closed: bool = False
    revealed: bool = False


@dataclass(frozen=True)
class Entry:
    id: int
    learner: str
    text: str
    created: float
    hidden: bool = False


@dataclass(frozen=True)
class Limits:
    """What ``RoomStore.add`` checks atomically with the insert."""

    per_minute: int
    max_entries: int


class RoomStore(ABC):
    """Where rooms and entries live (``SQLiteRoomStore``, ``RedisRoomStore``): shared by every replica, the truth of
    every screen. A room idle for ``idle_seconds`` (no entry, no moderation) is gone, with its entries."""

    idle_seconds: float

    @abstractmethod
    def create(self, room: Room, secret_hash: str, max_rooms: int) -> bool:
        """Add ``room``; False (and nothing added) when ``max_rooms`` live rooms exist already."""

    @abstractmethod
    def get(self, code: str, now: float) -> Room | None:
        """The room, or None when there is none or it has been idle too long (it is then deleted)."""

    @abstractmethod
    def secret_hash(self, code: str) -> str | None:
        """The SHA-256 (hex) of the room's presenter secret."""

    @abstractmethod
    def add(self, code: str, learner: str, text: str, now: float, limits: Limits) -> Entry | str:
        """Add an entry unless the room is missing, closed, locked, full or the learner sent ``limits.per_minute``
        entries in the last 60 s: then one of MISSING, CLOSED, LOCKED, FULL, TOO_FAST and nothing added."""

    @abstractmethod
    def entries(self, code: str) -> list[Entry]:
        """Every entry of the room, hidden ones included, oldest first."""

    @abstractmethod
    def set_flags(self, code: str, now: float, **flags: bool) -> None:
        """Set any of ``locked``, ``closed``, ``revealed``."""

    @abstractmethod
    def set_hidden(self, code: str, entry_id: int, hidden: bool, now: float) -> None: ...

    @abstractmethod
    def clear(self, code: str, now: float) -> None:
        """Delete every entry of the room (the room stays)."""

    @abstractmethod
    def live_rooms(self, now: float) -> int: ...

    @abstractmethod
    def close_store(self) -> None: ...


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def normal_code(text: str) -> str:
    """A typed code as stored: upper case, letters and digits only, at most 40 of them (``abcde-fghjk`` →
    ``ABCDEFGHJK``), so a code from a link can be written into any sentence as it is."""
    return re.sub(r"[^A-Z0-9]", "", (text or "").upper())[:40]


def shown_code(code: str) -> str:
    """The code in two groups of five, as the projector shows it."""
    return f"{code[:5]}-{code[5:]}"


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def new_learner() -> str:
    return secrets.token_urlsafe(9)


class Workshop:
    """The rules of rooms over one ``RoomStore`` and the ``RoomSettings``; every refusal is a ``RoomError``."""

    def __init__(self, store: RoomStore, settings: RoomSettings, clock=time.time) -> None:
        self.store, self.settings, self.clock = store, settings, clock

    @property
    def limits(self) -> Limits:
        return Limits(self.settings.per_minute, self.settings.max_entries)

    def open_room(self, model: str, word: str, view: str) -> tuple[Room, str]:
        """A new room and its presenter's secret (shown once, in the presenter's link; the store keeps its hash)."""
        if view not in VIEWS:
            raise RoomError(f"A room shows one of {', '.join(VIEWS)}, not {view!r}.")
        word = word.strip()
        if view == "senses" and not word:
            raise RoomError("Choose the word learners write sentences with.")
        now, secret = self.clock(), secrets.token_urlsafe(24)
        for _ in range(5):  # a clash among 2**49 codes is next to impossible; try again if it happens
            room = Room(new_code(), model, word, view, now, now)
            if self.store.get(room.code, now) is None:
                break
        if not self.store.create(room, secret_hash(secret), self.settings.max_rooms):
            raise RoomError(f"This server already has {self.settings.max_rooms} open rooms, its limit "
                            "(EXPLORER_ROOM_MAX_ROOMS); a room is deleted after "
                            f"{self.settings.idle_hours:g} hours without activity.")
        return room, secret

    def room(self, code: str) -> Room:
        """The room of ``code``; a RoomError when there is none (mistyped, or deleted after its idle time)."""
        room = self.store.get(normal_code(code), self.clock())
        if room is None:
            raise RoomError(f"There is no room {normal_code(code)!r} on this server: the code may be mistyped, or the "
                            f"room was deleted after {self.settings.idle_hours:g} hours without activity.")
        return room

    def problem(self, room: Room, text: str) -> str | None:
        """What is wrong with ``text`` as an entry of ``room`` before it is sent (None when nothing is)."""
        if not text.strip():
            return "Write a sentence first." if room.view == "senses" else "Choose a head first."
        if len(text) > self.settings.max_chars:
            return (f"Your sentence has {len(text):,} characters; a room takes at most {self.settings.max_chars:,} "
                    "(EXPLORER_ROOM_MAX_CHARS).")
        if room.view == "senses" and not find_word(text, room.word):
            return f"Your sentence does not contain the word “{room.word}” (as a whole word, any case)."
        if room.view == "vote" and not VOTE.match(text):
            return f"A vote names one head, such as L3H5, not {text[:20]!r}."
        return None

    def submit(self, code: str, learner: str, text: str) -> Entry:
        """Add ``text`` from ``learner``; a RoomError saying why when it cannot be added (nothing is stored then)."""
        room = self.room(code)
        problem = self.problem(room, text)
        if problem:
            raise RoomError(problem)
        added = self.store.add(room.code, learner, text.strip(), self.clock(), self.limits)
        if isinstance(added, Entry):
            return added
        if added == MISSING:  # deleted between the two reads: room() says so
            self.room(code)
        raise RoomError({
            MISSING: "This room was deleted while your entry was on its way. Your text is still in the box.",
            CLOSED: "The presenter has closed this room; it takes no more entries. Your text is still in the box.",
            LOCKED: "The presenter has locked this room for now; try again when it is unlocked. Your text is still "
                    "in the box.",
            FULL: f"This room is full: it holds at most {self.settings.max_entries:,} entries (EXPLORER_ROOM_MAX_ENTRIES).",
            TOO_FAST: f"You can send at most {self.settings.per_minute} entries a minute (EXPLORER_ROOM_PER_MINUTE); "
                      "wait a little and send again. Your text is still in the box.",
        }[added])

    def is_presenter(self, code: str, secret: str | None) -> bool:
        stored = self.store.secret_hash(normal_code(code))
        return bool(secret) and stored is not None and hmac.compare_digest(stored, secret_hash(secret))

    def moderate(self, code: str, secret: str | None, action: str, entry_id: int | None = None) -> None:
        """``action``: hide, restore, lock, unlock, reveal, clear or close; only with the presenter's secret."""
        room = self.room(code)
        if not self.is_presenter(room.code, secret):
            raise NotPresenter("Only the presenter's link can change this room; the learners' link cannot.")
        now = self.clock()
        if action in ("hide", "restore"):
            if entry_id is None:
                raise RoomError("Say which entry to hide or restore.")
            self.store.set_hidden(room.code, entry_id, action == "hide", now)
        elif action in ("lock", "unlock"):
            self.store.set_flags(room.code, now, locked=action == "lock")
        elif action == "reveal":
            self.store.set_flags(room.code, now, revealed=True)
        elif action == "close":
            self.store.set_flags(room.code, now, closed=True, locked=True)
        elif action == "clear":
            self.store.clear(room.code, now)
        else:
            raise RoomError(f"There is no room action {action!r}.")

    def visible(self, code: str) -> list[Entry]:
        """The entries every screen shows: hidden ones left out."""
        return [e for e in self.store.entries(normal_code(code)) if not e.hidden]

    def csv_text(self, code: str, secret: str | None) -> str:
        """Every entry of the room as CSV (hidden ones marked), for the presenter only."""
        room = self.room(code)
        if not self.is_presenter(room.code, secret):
            raise NotPresenter("Only the presenter's link can download this room's entries.")
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["entry", "learner", "sent_utc", "hidden", "text"])
        for e in self.store.entries(room.code):
            writer.writerow([e.id, e.learner, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(e.created)),
                             e.hidden, csv_safe(e.text)])
        return out.getvalue()


def csv_safe(text: str) -> str:
    """``text`` that a spreadsheet will not run as a formula (a leading = + - @ gets a quote mark first)."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
