"""Rooms in Redis (``EXPLORER_ROOM_STORE=redis://host:port/db``), shared by every replica behind nginx.

Per room: a hash ``explorer:room:<code>`` (its fields and the presenter secret's hash), a hash of entries (id → JSON),
a set of hidden entry ids, the id counter, and per learner a sorted set of the last minute's entry times; an index
``explorer:rooms`` (code → last activity) counts the live rooms. Every change is one Lua script, so the check (room
open, limits) and the write are one atomic step whichever replica runs it, and each refreshes the expiry of all the
room's keys: Redis itself deletes a room idle for ``idle_seconds``. An entry is acknowledged only after Redis stored
it, so a replica that dies afterwards loses nothing.
"""

from __future__ import annotations

import json

import redis

from core.workshop.rooms import Entry, Limits, Room, RoomStore

INDEX = "explorer:rooms"

# KEYS: room, entries, hidden, counter, learner zset; ARGV[1] code, ARGV[2] now, ARGV[3] idle ms. Refreshes expiry.
TOUCH = """
local function touch()
  redis.call('HSET', KEYS[1], 'touched', ARGV[2])
  for i = 1, 5 do redis.call('PEXPIRE', KEYS[i], ARGV[3]) end
  redis.call('ZADD', KEYS[6], ARGV[2], ARGV[1])
end
"""
CREATE = """
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', tonumber(ARGV[2]) - tonumber(ARGV[3]) / 1000)
if redis.call('ZCARD', KEYS[6]) >= tonumber(ARGV[4]) then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[6], ARGV[2], ARGV[1])
return 1
"""
ADD = TOUCH + """
local room = redis.call('HMGET', KEYS[1], 'touched', 'locked', 'closed')
if not room[1] then return {'missing'} end
local now = tonumber(ARGV[2])
if tonumber(room[1]) < now - tonumber(ARGV[3]) / 1000 then return {'missing'} end
if room[3] == '1' then return {'closed'} end
if room[2] == '1' then return {'locked'} end
if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[7]) then return {'full'} end
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now - 60)
if redis.call('ZCARD', KEYS[5]) >= tonumber(ARGV[6]) then return {'too fast'} end
local id = redis.call('INCR', KEYS[4])
redis.call('HSET', KEYS[2], id, cjson.encode({learner = ARGV[4], text = ARGV[5], created = ARGV[2]}))
redis.call('ZADD', KEYS[5], now, id)
touch()
return {'ok', id}
"""
# ARGV[4]: 'flags' (then field, value pairs), 'hide' / 'restore' (then the entry id) or 'clear'
CHANGE = TOUCH + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[4] == 'flags' then redis.call('HSET', KEYS[1], unpack(ARGV, 5))
elseif ARGV[4] == 'hide' then if redis.call('HEXISTS', KEYS[2], ARGV[5]) == 1 then redis.call('SADD', KEYS[3], ARGV[5]) end
elseif ARGV[4] == 'restore' then redis.call('SREM', KEYS[3], ARGV[5])
elseif ARGV[4] == 'clear' then redis.call('DEL', KEYS[2], KEYS[3]) end
touch()
return 1
"""


class RedisRoomStore(RoomStore):
    def __init__(self, url: str, idle_seconds: float) -> None:
        self.url, self.idle_seconds = url, idle_seconds
        self.redis = redis.Redis.from_url(url, decode_responses=True, socket_timeout=5, health_check_interval=30,
                                          retry_on_timeout=True)
        self._create, self._add, self._change = (self.redis.register_script(s) for s in (CREATE, ADD, CHANGE))

    @property
    def _idle_ms(self) -> int:
        return max(1, int(self.idle_seconds * 1000))

    @staticmethod
    def keys(code: str, learner: str = "") -> list[str]:
        base = f"explorer:room:{code}"
        return [base, f"{base}:entries", f"{base}:hidden", f"{base}:next", f"{base}:learner:{learner}", INDEX]

    def create(self, room: Room, secret_hash: str, max_rooms: int) -> bool:
        fields = {"model": room.model, "word": room.word, "view": room.view, "created": repr(room.created),
                  "touched": repr(room.touched), "locked": "0", "closed": "0", "revealed": "0",
                  "secret_hash": secret_hash}
        pairs = [x for item in fields.items() for x in item]
        return bool(self._create(keys=self.keys(room.code), args=[room.code, repr(room.created), self._idle_ms,
                                                                   max_rooms, *pairs]))

    def get(self, code: str, now: float) -> Room | None:
        fields = self.redis.hgetall(self.keys(code)[0])
        if not fields or float(fields["touched"]) < now - self.idle_seconds:
            return None
        return Room(code, fields["model"], fields["word"], fields["view"], float(fields["created"]),
                    float(fields["touched"]), *(fields[f] == "1" for f in ("locked", "closed", "revealed")))

    def secret_hash(self, code: str) -> str | None:
        return self.redis.hget(self.keys(code)[0], "secret_hash")

    def add(self, code: str, learner: str, text: str, now: float, limits: Limits) -> Entry | str:
        answer = self._add(keys=self.keys(code, learner), args=[code, repr(now), self._idle_ms, learner, text,
                                                                 limits.per_minute, limits.max_entries])
        if answer[0] != "ok":
            return answer[0]
        return Entry(int(answer[1]), learner, text, now)

    def entries(self, code: str) -> list[Entry]:
        keys = self.keys(code)
        with self.redis.pipeline(transaction=True) as pipe:
            stored, hidden = pipe.hgetall(keys[1]).smembers(keys[2]).execute()
        entries = []
        for key, value in stored.items():
            fields = json.loads(value)
            entries.append(Entry(int(key), fields["learner"], fields["text"], float(fields["created"]), key in hidden))
        return sorted(entries, key=lambda e: e.id)

    def _run_change(self, code: str, now: float, *args) -> None:
        self._change(keys=self.keys(code), args=[code, repr(now), self._idle_ms, *args])

    def set_flags(self, code: str, now: float, **flags: bool) -> None:
        unknown = set(flags) - {"locked", "closed", "revealed"}
        if unknown:
            raise ValueError(f"unknown room flags {sorted(unknown)}")
        self._run_change(code, now, "flags", *[x for name, value in flags.items() for x in (name, str(int(value)))])

    def set_hidden(self, code: str, entry_id: int, hidden: bool, now: float) -> None:
        self._run_change(code, now, "hide" if hidden else "restore", str(int(entry_id)))

    def clear(self, code: str, now: float) -> None:
        self._run_change(code, now, "clear")

    def live_rooms(self, now: float) -> int:
        self.redis.zremrangebyscore(INDEX, "-inf", now - self.idle_seconds)
        return self.redis.zcard(INDEX)

    def close_store(self) -> None:
        self.redis.close()
