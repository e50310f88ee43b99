"""Workshop room load: 100 protocol-level learners send a sentence to one room within 30 s while the presenter's
projector stays open (``bench/protocol.py``'s ``send_in_room`` and ``watch_room``: Streamlit's own websocket messages).

Figures: entries stored (all 100?), seconds from the last learner's answer to the projector showing all of them
(target ≤ 3 s), p50/p95/max seconds from Send to the run that drew the learner's own map on MiniLM (target p95 ≤ 3 s),
and the store's disk and memory per room of 100 entries. ``python -m bench room`` (one server, SQLite);
``ROOM_BENCH_REPLICAS=2`` runs two replicas behind nginx sharing one Redis and kills one halfway: no acknowledged
entry may be lost, and its learners send again through nginx to the other replica, to the same room.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

LEARNERS = int(os.environ.get("ROOM_BENCH_LEARNERS", "100"))
SPREAD_SECONDS = 30.0
MODEL = "all-MiniLM-L6-v2"
PLACES = ["river", "vault", "hill", "city", "lake", "market", "harbour", "village", "canal", "square"]


def sentence(i: int) -> str:
    return f"Learner {i} walked to the bank by the {PLACES[i % len(PLACES)]} on day {i // len(PLACES) + 1}."


async def room_run(url: str, code: str, secret: str, kill=None, projector_url: str | None = None) -> dict:
    """``projector_url``: where the projector connects (the replica that is not killed; learners go through ``url``)."""
    from bench.protocol import send_in_room, watch_room

    projector = asyncio.create_task(watch_room(projector_url or url, {"room": code, "key": secret}, lambda n: n >= LEARNERS,
                                               timeout=SPREAD_SECONDS + 600))

    async def learner(i: int):
        await asyncio.sleep(i * SPREAD_SECONDS / LEARNERS)
        if kill is not None and i == LEARNERS // 2:
            kill()
        query, headers = {"room": code, "me": f"bench-learner-{i}"}, {"Cookie": f"explorer_route=learner-{i}"}
        result = await send_in_room(url, query, sentence(i), headers=headers)
        retried = False
        if not result.ok and kill is not None:  # their replica died: the page reconnects, through nginx, to the room
            retried = True
            result = await send_in_room(url, query, sentence(i), headers=headers)
        return result, retried

    started = time.monotonic()
    results = await asyncio.gather(*(learner(i) for i in range(LEARNERS)))
    seen = await projector
    return {"results": results, "seen": seen, "wall": time.monotonic() - started}


def summary(run: dict, entries: list) -> dict:
    """``entries``: the room's entries as the store holds them after the run (their ``created``: wall-clock time)."""
    from tests.browser.load import percentile

    stored = len(entries)
    all_seen = next((t for t, n in run["seen"] if n >= stored), None)
    lag = None if all_seen is None or not entries else all_seen - max(e.created for e in entries)
    sent = [r for r, _ in run["results"]]
    ok = sorted(r.seconds for r in sent if r.ok)
    return {
        "learners": LEARNERS, "acknowledged": len(ok), "stored": stored,
        "retried_after_kill": sum(1 for _, retried in run["results"] if retried),
        "refused_or_failed": [r.said or r.errors[:1] for r in sent if not r.ok][:5],
        "p50_send_to_own_map_s": round(percentile(ok, 50), 2) if ok else None,
        "p95_send_to_own_map_s": round(percentile(ok, 95), 2) if ok else None,
        "max_send_to_own_map_s": round(ok[-1], 2) if ok else None,
        "projector_all_after_last_stored_s": None if lag is None else round(lag, 2),
        "projector_updates_seen": len(run["seen"]), "wall_seconds": round(run["wall"], 1),
    }


def main() -> dict:
    from core.workshop.rooms import Workshop
    from core.workshop.settings import load_room_settings
    from core.workshop.stores import open_store

    replicas = int(os.environ.get("ROOM_BENCH_REPLICAS", "1"))
    load_before = [round(x, 2) for x in os.getloadavg()]
    limits = {"EXPLORER_ROOM_PER_MINUTE": "100", "EXPLORER_ROOM_MAX_ENTRIES": "1000"}
    with tempfile.TemporaryDirectory() as tmp:
        if replicas == 1:
            from tests.browser.conftest import serve_app
            from tests.browser.load import PeakRSS

            db = Path(tmp) / "rooms.sqlite3"
            env = {"EXPLORER_ROOM_STORE": f"sqlite:///{db}", **limits}
            settings = load_room_settings(environ=env)
            workshop = Workshop(open_store(settings), settings)
            with serve_app(Path(tmp) / "server.log", env) as (url, proc), PeakRSS(proc.pid) as rss:
                room, secret = workshop.open_room(MODEL, "bank", "senses")
                asyncio.run(warm(url, room.code))
                workshop.moderate(room.code, secret, "clear")
                empty_bytes = disk_bytes(db)
                rss_before = rss.process.memory_info().rss
                run = asyncio.run(room_run(url, room.code, secret))
                result = summary(run, workshop.store.entries(room.code))
                result["store"] = "sqlite"
                result["disk_bytes_per_100_entries"] = round((disk_bytes(db) - empty_bytes) * 100 / LEARNERS)
                result["server_rss_growth_mb"] = round((rss.process.memory_info().rss - rss_before) / 2**20)
                result["server_peak_rss_mb"] = round(rss.peak / 2**20)
        else:
            from deploy.local import deployment, stop

            with deployment(replicas, Path(tmp) / "deploy", env=limits, redis=True) as d:
                settings = load_room_settings(environ={"EXPLORER_ROOM_STORE": d.extra["redis"], **limits})
                workshop = Workshop(open_store(settings), settings)
                room, secret = workshop.open_room(MODEL, "bank", "senses")
                for r in d.replicas:
                    asyncio.run(warm(r.url, room.code))
                workshop.moderate(room.code, secret, "clear")
                redis = workshop.store.redis
                memory_before = redis.info("memory")["used_memory"]
                run = asyncio.run(room_run(d.url, room.code, secret, kill=lambda: stop(d.replicas[0].proc),
                                    projector_url=d.replicas[1].url))
                result = summary(run, workshop.store.entries(room.code))
                result["store"] = f"redis, {replicas} replicas behind nginx, replica 0 killed halfway"
                result["redis_bytes_per_100_entries"] = round((redis.info("memory")["used_memory"] - memory_before)
                                                              * 100 / max(1, result["stored"]))
                keys = workshop.store.keys(room.code)
                result["redis_room_keys_bytes"] = sum(redis.memory_usage(k) or 0 for k in keys[:4])
    result.update(load_average_before=load_before, load_average_after=[round(x, 2) for x in os.getloadavg()],
                  cpus=os.cpu_count())
    for key, value in result.items():
        print(f"{key:>36}: {value}")
    return result


async def warm(url: str, code: str) -> None:
    """One learner's sentence before the run, then cleared: the model load and first placement are not the room's."""
    from bench.protocol import send_in_room

    await send_in_room(url, {"room": code, "me": "warm-up"}, "A warm-up sentence about the bank.")


def disk_bytes(db: Path) -> int:
    """The SQLite file's bytes once its write-ahead log is checkpointed into it (the log's size is its own policy)."""
    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if p.exists())



if __name__ == "__main__":
    main()
