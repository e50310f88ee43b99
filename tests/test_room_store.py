"""The room store and its rules, against both back ends: SQLite on a temporary file, Redis on a real redis-server."""

from __future__ import annotations

import math
import sqlite3
import threading

import pytest

from core.workshop.redis_store import RedisRoomStore
from core.workshop.rooms import CODE_ALPHABET, CODE_LENGTH, NotPresenter, RoomError, Workshop, secret_hash
from core.workshop.settings import RoomSettings, RoomSettingsError, load_room_settings
from core.workshop.sqlite_store import SQLiteRoomStore
from core.workshop.stores import open_store
from tests.room_fixtures import redis_url  # noqa: F401 - a fixture, used by name

IDLE = 3600.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def settings(store: str, **changes) -> RoomSettings:
    values = dict(store=store, max_chars=300, per_minute=3, max_entries=8, max_rooms=3, idle_hours=IDLE / 3600)
    return RoomSettings(**(values | changes))


@pytest.fixture(params=["sqlite", "redis"])
def make(request, tmp_path):
    """``make(**setting changes)`` → a Workshop over a fresh store of the parametrised back end, and its clock."""
    made = []

    def build(**changes):
        if request.param == "sqlite":
            store = SQLiteRoomStore(tmp_path / "data" / "rooms.sqlite3", IDLE)
        else:
            url = request.getfixturevalue("redis_url")
            store = RedisRoomStore(url, IDLE)
            if not made:
                store.redis.flushdb()
        made.append(store)
        clock = Clock()
        return Workshop(store, settings(store_url(store), **changes), clock), clock

    yield build
    for store in made:
        store.close_store()


def store_url(store) -> str:
    return store.url if isinstance(store, RedisRoomStore) else f"sqlite:///{store.path}"


def test_a_code_has_at_least_40_bits_and_the_store_keeps_no_secret(make):
    workshop, _ = make()
    room, secret = workshop.open_room("all-MiniLM-L6-v2", "bank", "senses")
    assert len(room.code) == CODE_LENGTH and set(room.code) <= set(CODE_ALPHABET)
    assert CODE_LENGTH * math.log2(len(CODE_ALPHABET)) >= 40
    assert secret not in room.code and len(secret) >= 32
    assert workshop.store.secret_hash(room.code) == secret_hash(secret) != secret
    other, _ = workshop.open_room("all-MiniLM-L6-v2", "bank", "senses")
    assert other.code != room.code


def test_entries_round_trip_and_hostile_text_is_kept_as_typed(make):
    workshop, _ = make(max_chars=200_000, per_minute=10)
    room, _ = workshop.open_room("m", "bank", "senses")
    texts = ["<script>alert(1)</script> the bank **bold**", "ذهبت إلى bank النهر", "bank " + "x" * 100_000]
    for i, text in enumerate(texts):
        workshop.submit(room.code, f"learner{i}", text)
    assert [e.text for e in workshop.visible(room.code)] == texts
    assert [e.learner for e in workshop.visible(room.code)] == ["learner0", "learner1", "learner2"]


def test_an_entry_without_the_word_empty_or_too_long_is_refused_and_not_stored(make):
    workshop, _ = make()
    room, _ = workshop.open_room("m", "bank", "senses")
    for text, says in [("", "Write a sentence"), ("   ", "Write a sentence"), ("We sat by the riverbank.", "does not contain"),
                       ("bank " * 100, "at most 300")]:
        with pytest.raises(RoomError, match=says):
            workshop.submit(room.code, "me", text)
    assert workshop.store.entries(room.code) == []


def test_entries_per_learner_per_minute(make):
    workshop, clock = make()
    room, _ = workshop.open_room("m", "bank", "senses")
    for i in range(3):
        workshop.submit(room.code, "me", f"bank {i}")
    with pytest.raises(RoomError, match="at most 3 entries a minute"):
        workshop.submit(room.code, "me", "bank 4")
    workshop.submit(room.code, "someone else", "bank 5")  # another learner is not held back
    clock.now += 61
    workshop.submit(room.code, "me", "bank 6")
    assert len(workshop.store.entries(room.code)) == 5


def test_entries_per_room_and_rooms_per_server(make):
    workshop, _ = make()
    room, _ = workshop.open_room("m", "bank", "senses")
    for i in range(8):
        workshop.submit(room.code, f"l{i}", "bank")
    with pytest.raises(RoomError, match="at most 8 entries"):
        workshop.submit(room.code, "l9", "bank")
    workshop.open_room("m", "bank", "senses")
    workshop.open_room("m", "bank", "senses")
    with pytest.raises(RoomError, match="already has 3 open rooms"):
        workshop.open_room("m", "bank", "senses")


def test_only_the_presenter_secret_moderates(make):
    workshop, _ = make()
    room, secret = workshop.open_room("m", "bank", "senses")
    entry = workshop.submit(room.code, "me", "the bank")
    for wrong in (None, "", "guess", secret[:-1]):
        with pytest.raises(NotPresenter):
            workshop.moderate(room.code, wrong, "hide", entry.id)
        with pytest.raises(NotPresenter):
            workshop.csv_text(room.code, wrong)
    assert [e.hidden for e in workshop.store.entries(room.code)] == [False]
    workshop.moderate(room.code, secret, "hide", entry.id)
    assert workshop.visible(room.code) == [] and workshop.store.entries(room.code)[0].hidden
    workshop.moderate(room.code, secret, "restore", entry.id)
    assert [e.text for e in workshop.visible(room.code)] == ["the bank"]


def test_lock_close_and_clear(make):
    workshop, _ = make()
    room, secret = workshop.open_room("m", "bank", "senses")
    workshop.submit(room.code, "a", "bank one")
    workshop.moderate(room.code, secret, "lock")
    with pytest.raises(RoomError, match="locked"):
        workshop.submit(room.code, "a", "bank two")
    workshop.moderate(room.code, secret, "unlock")
    workshop.submit(room.code, "a", "bank two")
    workshop.moderate(room.code, secret, "close")
    with pytest.raises(RoomError, match="closed"):
        workshop.submit(room.code, "b", "bank three")
    assert workshop.room(room.code).closed
    csv_text = workshop.csv_text(room.code, secret)  # a closed room keeps its entries for the presenter
    assert "bank one" in csv_text and "bank two" in csv_text
    workshop.moderate(room.code, secret, "clear")
    assert workshop.store.entries(room.code) == []


def test_csv_neutralises_formulas(make):
    workshop, _ = make()
    room, secret = workshop.open_room("m", "bank", "senses")
    workshop.submit(room.code, "a", "=HYPERLINK(\"x\") bank")
    assert "'=HYPERLINK" in workshop.csv_text(room.code, secret)


def test_an_idle_room_expires_with_its_entries(make):
    workshop, clock = make()
    room, _ = workshop.open_room("m", "bank", "senses")
    clock.now += IDLE - 10
    workshop.submit(room.code, "a", "bank")  # activity restarts the idle clock
    clock.now += IDLE - 10
    assert workshop.room(room.code).code == room.code
    clock.now += 20
    with pytest.raises(RoomError, match="no room .* without activity"):
        workshop.room(room.code)
    with pytest.raises(RoomError):
        workshop.submit(room.code, "a", "bank")
    assert workshop.store.live_rooms(clock.now) == 0


def test_two_replicas_never_take_more_than_the_limit(make):
    """Two stores on the same file or server (two replicas), 4 threads each racing for 8 places."""
    first, _ = make(per_minute=100)
    second, _ = make(per_minute=100)
    room, _ = first.open_room("m", "bank", "senses")
    taken, refused = [], []

    def send(workshop, n):
        for i in range(6):
            try:
                taken.append(workshop.submit(room.code, f"{n}-{i}", f"bank {n} {i}"))
            except RoomError:
                refused.append(n)

    threads = [threading.Thread(target=send, args=(w, n)) for n, w in enumerate([first, second] * 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stored = second.store.entries(room.code)
    assert len(stored) == 8 == len(taken) and len(refused) == 40
    assert sorted(e.id for e in stored) == sorted(e.id for e in taken)


def test_a_code_from_a_link_keeps_only_letters_and_digits(make):
    workshop, _ = make()
    with pytest.raises(RoomError) as refused:
        workshop.room("[x](javascript:alert(1)) <b>")
    assert "'XJAVASCRIPTALERT1B'" in str(refused.value) and "<" not in str(refused.value)
    room, _ = workshop.open_room("m", "bank", "senses")
    assert workshop.room(f" {room.code[:5].lower()}-{room.code[5:]} ").code == room.code


def test_sqlite_runs_in_wal_mode_in_the_data_folder(tmp_path):
    chosen = load_room_settings(environ={"EXPLORER_DATA_DIR": str(tmp_path / "d")})
    store = open_store(chosen)
    try:
        assert isinstance(store, SQLiteRoomStore) and store.path == tmp_path / "d" / "rooms.sqlite3"
        assert store.journal_mode() == "wal"
        with sqlite3.connect(store.path) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        store.close_store()


def test_settings_defaults_and_errors():
    laptop, server = load_room_settings(environ={}), load_room_settings(environ={"EXPLORER_MODE": "server"})
    assert (laptop.per_minute, server.per_minute) == (10, 4) and server.max_chars == 200
    assert load_room_settings(environ={"EXPLORER_ROOM_STORE": "redis://h:1/2"}).store == "redis://h:1/2"
    with pytest.raises(RoomSettingsError, match="EXPLORER_ROOM_MAX_ENTRIES"):
        load_room_settings(environ={"EXPLORER_ROOM_MAX_ENTRIES": "0"})
    with pytest.raises(ValueError, match="EXPLORER_ROOM_STORE"):
        load_room_settings(environ={"EXPLORER_ROOM_STORE": "postgres://x"})


def test_redis_keys_expire_after_the_idle_time(redis_url):
    store = RedisRoomStore(redis_url, 120)
    workshop = Workshop(store, settings(redis_url, idle_hours=120 / 3600))
    room, _ = workshop.open_room("m", "bank", "senses")
    workshop.submit(room.code, "a", "bank")
    for key in store.keys(room.code, "a")[:5]:
        if key.endswith(":hidden"):
            continue
        assert 100_000 < store.redis.pttl(key) <= 120_000, key
    store.close_store()
