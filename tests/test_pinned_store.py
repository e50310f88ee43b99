"""The pinned figures' store (``core.workshop.pinned``) against both back ends: SQLite on a temporary file, Redis on a
real redis-server. Round trips of hostile strings, the per-figure cap, oldest-first eviction past the total cap, two
processes' connections sharing one store, and the store the room settings name."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.workshop.pinned import (
    PINNED_FILE,
    STORED,
    TOO_BIG,
    PinLimits,
    RedisPinnedStore,
    SQLitePinnedStore,
    open_pinned_store,
    packed,
    pin_limits,
    store_key,
)
from core.workshop.settings import RoomSettingsError, load_room_settings
from tests.room_fixtures import redis_url  # noqa: F401 - a fixture, used by name

HOSTILE = ['</script><script>alert("x")</script> & <b>bold</b>', "ذهبت إلى bank النهر 🙂", "a\x00b\nc\r\n\"'\\",
           "'; DROP TABLE pinned; --", "{\"figure\": 1}", "x" * 10_000]


ROOMY = PinLimits(1_000_000, 10_000_000)


@pytest.fixture(params=["sqlite", "redis"])
def make(request, tmp_path):
    """``make(limits)`` → a fresh store of the parametrised back end (a second call: another connection to the same)."""
    made = []

    def build(limits: PinLimits = ROOMY):
        if request.param == "sqlite":
            store = SQLitePinnedStore(tmp_path / "data" / PINNED_FILE, limits)
        else:
            store = RedisPinnedStore(request.getfixturevalue("redis_url"), limits)
            if not made:
                store.redis.flushdb()
        made.append(store)
        return store

    yield build
    for store in made:
        store.close_store()


def _size(figure: str, table: str, sentence: str) -> int:
    """A stored value's bytes, written independently of the store: the three texts as one JSON object, UTF-8."""
    return len(json.dumps({"figure": figure, "table": table, "sentence": sentence}, ensure_ascii=False).encode())


def test_hostile_strings_come_back_as_stored_in_keys_and_values(make):
    store = make()
    for i, text in enumerate(HOSTILE):
        key = (text, f"./compare?text_a={text}#{text}")
        figure = json.dumps({"data": [{"type": "heatmap", "z": [[i]], "text": [[text]]}], "layout": {"title": text}})
        assert store.put(key, figure, f"token,value\n{text},{i}\n", text) == STORED
    for i, text in enumerate(HOSTILE):
        got = store.get((text, f"./compare?text_a={text}#{text}"))
        assert json.loads(got.figure_json)["layout"]["title"] == text
        assert json.loads(got.figure_json)["data"][0]["z"] == [[i]]
        assert got.table_csv == f"token,value\n{text},{i}\n" and got.sentence == text
    assert store.get(("model", "./never-pinned")) is None
    assert store.get((HOSTILE[0], "./compare")) is None  # the model is part of the key
    again = make()  # another connection (another replica) reads the same
    assert again.get((HOSTILE[1], f"./compare?text_a={HOSTILE[1]}#{HOSTILE[1]}")).sentence == HOSTILE[1]


def test_a_figure_past_the_size_cap_is_refused_and_nothing_is_stored(make):
    table = "a,b\n" + "1,2\n" * 250
    exact = _size("{}", table, "s")
    store = make(PinLimits(exact, 10 * exact))
    assert store.put(("m", "./inside#fig"), "{}", table, "s") == STORED  # exactly at the cap: kept
    assert store.put(("m", "./inside#big"), "{}", table + "x", "s") == TOO_BIG
    assert store.get(("m", "./inside#big")) is None
    assert store.total_bytes() == exact
    wide = "é" * (exact // 2)  # two bytes each in UTF-8: the cap counts bytes, not characters
    assert store.put(("m", "./inside#wide"), "{}", "", wide) == TOO_BIG


def test_past_the_total_cap_the_oldest_stored_go_first(make):
    one = _size("{}", "t" * 900, "s")
    store = make(PinLimits(one, 3 * one))
    for n in range(3):
        assert store.put(("m", f"./flow#{n}"), "{}", "t" * 900, "s") == STORED
    assert store.total_bytes() == 3 * one
    store.put(("m", "./flow#0"), "{}", "u" * 900, "s")  # stored again: now the newest, not counted twice
    assert store.total_bytes() == 3 * one
    store.put(("m", "./flow#3"), "{}", "t" * 900, "s")  # one too many: the oldest stored (#1) goes
    assert [store.get(("m", f"./flow#{n}")) is not None for n in range(4)] == [True, False, True, True]
    assert store.get(("m", "./flow#0")).table_csv == "u" * 900
    store.put(("m", "./flow#4"), "{}", "t" * 900, "s")
    store.put(("m", "./flow#5"), "{}", "t" * 900, "s")
    assert [store.get(("m", f"./flow#{n}")) is not None for n in range(6)] == [False, False, False, True, True, True]
    assert store.total_bytes() == 3 * one
    half = _size("{}", "t" * 400, "s")
    store.put(("m", "./flow#6"), "{}", "t" * 400, "s")  # a small one pushes out one big one, not two
    assert [store.get(("m", f"./flow#{n}")) is not None for n in range(3, 7)] == [False, True, True, True]
    assert store.total_bytes() == 2 * one + half


def test_an_unreadable_value_reads_as_missing(tmp_path):
    store = SQLitePinnedStore(tmp_path / PINNED_FILE, PinLimits(1000, 10_000))
    store.put(("m", "./drift#x"), "{}", "", "s")
    with sqlite3.connect(tmp_path / PINNED_FILE) as db:
        db.execute("UPDATE pinned SET value = 'not json{'")
    assert store.get(("m", "./drift#x")) is None
    store.close_store()


def test_the_store_sits_beside_the_rooms_and_reads_its_limits(tmp_path, redis_url):
    rooms = load_room_settings(environ={"EXPLORER_DATA_DIR": str(tmp_path / "d")})
    store = open_pinned_store(rooms, pin_limits({}))
    assert isinstance(store, SQLitePinnedStore) and store.path == tmp_path / "d" / PINNED_FILE
    assert store.limits == PinLimits(8_000_000, 256_000_000, 30 * 86_400)
    with sqlite3.connect(store.path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close_store()
    shared = open_pinned_store(load_room_settings(environ={"EXPLORER_ROOM_STORE": redis_url}),
                               pin_limits({"EXPLORER_PIN_FIGURE_MB": "0.5", "EXPLORER_PIN_STORE_MB": "2"}))
    assert isinstance(shared, RedisPinnedStore) and shared.limits == PinLimits(500_000, 2_000_000)
    shared.close_store()
    assert pin_limits({"EXPLORER_PIN_FIGURE_MB": "50", "EXPLORER_PIN_STORE_MB": "10"}).figure_bytes == 10_000_000
    assert pin_limits({"EXPLORER_PIN_IDLE_DAYS": "0.5"}).idle_seconds == 43_200
    with pytest.raises(RoomSettingsError, match="EXPLORER_PIN_IDLE_DAYS"):
        pin_limits({"EXPLORER_PIN_IDLE_DAYS": "0"})
    for bad in ("0", "-1", "lots"):
        with pytest.raises(RoomSettingsError, match="EXPLORER_PIN_STORE_MB"):
            pin_limits({"EXPLORER_PIN_STORE_MB": bad})


def test_another_process_reads_what_this_one_stored(make):
    store = make()
    store.put(("model", "./inside?head=1#fig"), '{"data": []}', "a,b\n1,2\n", HOSTILE[0])
    where = (f"SQLitePinnedStore({str(store.path)!r}, PinLimits(1, 1))" if isinstance(store, SQLitePinnedStore)
             else f"RedisPinnedStore({store.url!r}, PinLimits(1, 1))")
    code = ("import json; from core.workshop.pinned import SQLitePinnedStore, RedisPinnedStore, PinLimits; "
            f"got = {where}.get(('model', './inside?head=1#fig')); "
            "print(json.dumps([got.figure_json, got.table_csv, got.sentence]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[1]).stdout
    assert json.loads(out) == ['{"data": []}', "a,b\n1,2\n", HOSTILE[0]]


def test_a_figure_idle_past_the_limit_is_gone_and_a_read_keeps_one_in_use(make):
    day = 86_400
    store = make(PinLimits(1_000_000, 10_000_000, idle_seconds=2 * day))
    start = 1_700_000_000.0
    for n in range(3):
        assert store.put(("m", f"./flow#{n}"), "{}", f"t{n}", "s", now=start) == STORED
    assert store.get(("m", "./flow#0"), now=start + 1.5 * day).table_csv == "t0"  # read: its idle time starts again
    assert store.get(("m", "./flow#1"), now=start + 2 * day - 1) is not None  # just inside the limit
    assert store.get(("m", "./flow#2"), now=start + 2 * day + 1) is None  # idle past it: not returned …
    assert store.get(("m", "./flow#2"), now=start) is None  # … and deleted, not only hidden
    store.put(("m", "./flow#3"), "{}", "t3", "s", now=start + 3.2 * day)  # a put deletes every idle figure
    assert [store.get(("m", f"./flow#{n}"), now=start + 3.2 * day) is not None for n in range(4)] == [
        True, True, False, True]  # #0 read at 1.5 days, #1 at 2 days − 1 s: both idle under 2 days; #2 gone
    assert store.total_bytes() == sum(_size("{}", f"t{n}", "s") for n in (0, 1, 3))
    store.put(("m", "./flow#4"), "{}", "t4", "s", now=start + 5.3 * day)  # the rest idle past 2 days: only #4 is left
    assert store.total_bytes() == _size("{}", "t4", "s")


def test_figures_stored_by_an_older_app_start_their_idle_time_when_the_store_opens(tmp_path, redis_url):
    day = 86_400
    path = tmp_path / PINNED_FILE
    with sqlite3.connect(path) as db:  # the table as the app before idle limits wrote it
        db.execute("CREATE TABLE pinned (name TEXT PRIMARY KEY, size INTEGER NOT NULL, seq INTEGER NOT NULL, "
                   "value TEXT NOT NULL)")
        db.execute("INSERT INTO pinned VALUES (?, ?, 1, ?)", (store_key("m", "./a"), 10, packed("{}", "old", "s")))
    store = SQLitePinnedStore(path, PinLimits(1_000_000, 10_000_000, idle_seconds=day))
    assert store.get(("m", "./a")).table_csv == "old"
    assert store.get(("m", "./a"), now=time.time() + 2 * day) is None
    store.close_store()

    shared = RedisPinnedStore(redis_url, PinLimits(1_000_000, 10_000_000, idle_seconds=day))
    shared.redis.flushdb()
    name = store_key("m", "./b")  # the keys an older app wrote: no use time
    shared.redis.hset("explorer:pinned:values", name, packed("{}", "old", "s"))
    shared.redis.hset("explorer:pinned:sizes", name, 10)
    shared.redis.zadd("explorer:pinned:order", {name: 1})
    shared.redis.set("explorer:pinned:total", 10)
    reopened = RedisPinnedStore(redis_url, PinLimits(1_000_000, 10_000_000, idle_seconds=day))
    assert reopened.get(("m", "./b")).table_csv == "old"
    assert reopened.get(("m", "./b"), now=time.time() + 2 * day) is None
    assert reopened.total_bytes() == 0
    shared.close_store()
    reopened.close_store()
