"""Sizing a workshop (issue 29): learners one replica on one core sustains at p95 <= 6 s, its memory, and 2 replicas
behind nginx with 80 learners on the tour.

Protocol-level learners (``bench/protocol.py``: Streamlit's own websocket messages, no browsers), each a fresh
session with its own sentence, all connecting at the same moment:

- **attention**: everyone opens ``/attention?text=<own text>``;
- **tour step**: everyone opens the same tour step, ``/tour?step=k&text=<own text>`` (a link to the step: a new
  session, a little more work than a click on Next in an open one). The step is the tour's most expensive one for a
  new sentence on that model: one learner walks all ten steps twice (the first walk fills the caches every learner
  shares, the second, with another sentence, measures what one more learner costs) and the step of the second walk
  that took the server most CPU-seconds is the one the room does together.

**Per core**: one replica started under ``taskset -c`` on one core with ``OMP_NUM_THREADS=1``, learners connecting
to it directly; rooms of ``ROOMS`` learners, stepping up until p95 passes 6 s or a learner sees an error. Both
bundled models (``?model=SmolLM2-135M-Instruct`` for the language model). Memory: the replica's resident set
(RSS) after each model's warm-up and its peak over the whole run. UMAP's background compilation (which starts once the
server has been idle for ten seconds) is let finish before any room is timed.

**2 replicas behind nginx** (``deploy/local.py``, each pinned to its own core, ``OMP_NUM_THREADS=1``): 80 learners,
each a cookie jar (a GET of the page, then every websocket with nginx's routing cookie), do all ten tour steps
together on the default model, step by step; p95 of every step, errors, which replicas served.

Other processes on the machine share its cores; the load average before and after is recorded, and the server's
CPU-seconds per learner (``cpu_s_per_learner``), which contention does not inflate much, with each room.

Run: ``python -m bench sizing`` (about 10-20 minutes on 2 cores).
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import tempfile
import time
import urllib.request
from collections import Counter
from http.cookiejar import CookieJar
from pathlib import Path

from bench import cpu_seconds

TARGET_P95_S = 6.0
ROOMS = (2, 5, 10, 20, 30, 40, 50, 60, 80, 100, 120)
TWO_REPLICA_ROOM = 80
TOUR_STEPS = 10
MODELS = {"all-MiniLM-L6-v2": None, "SmolLM2-135M-Instruct": "SmolLM2-135M-Instruct"}
TIMEOUT_S = 240.0
WORDS = ["apple", "river", "guitar", "planet", "pencil", "tiger", "castle", "rocket", "violin", "garden"]


def texts(n: int, salt: str = "") -> list[str]:
    """``n`` distinct sentences of about a dozen tokens (``salt`` makes another set: a room never reuses a cache)."""
    return [f"The {WORDS[i % len(WORDS)]} {salt}was left beside door {i // len(WORDS) + 1} today." for i in range(n)]


def query(text: str, model: str | None, **extra) -> dict[str, str]:
    return {"text": text, **({"model": model} if model else {}), **{k: str(v) for k, v in extra.items()}}


def room(url: str, page: str, queries: list[dict[str, str]], pids: list[int],
         cookies: list[str] | None = None) -> dict:
    """Every query at the same moment, a session each; seconds to each session's last script run, errors, CPU."""
    from bench.protocol import view_page
    from tests.browser.load import percentile

    cpu_before = sum(cpu_seconds(pid) for pid in pids)
    started = time.perf_counter()

    async def together():
        return await asyncio.gather(*(
            view_page(url, page, q, timeout=TIMEOUT_S, headers={"Cookie": cookies[i]} if cookies else None)
            for i, q in enumerate(queries)))

    views = asyncio.run(together())
    wall = time.perf_counter() - started
    cpu = sum(cpu_seconds(pid) for pid in pids) - cpu_before
    finished = sorted(v.seconds for v in views if not math.isnan(v.seconds))
    errors = [e for v in views for e in v.errors]
    failed = sum(bool(v.errors) or math.isnan(v.seconds) for v in views)
    return {
        "learners": len(queries),
        "p50_s": round(percentile(finished, 50), 2) if finished else None,
        "p95_s": round(percentile(finished, 95), 2) if finished else None,
        "max_s": round(finished[-1], 2) if finished else None,
        "errors": failed,
        "first_errors": errors[:3],
        "wall_s": round(wall, 1),
        "cpu_s_per_learner": round(cpu / len(queries), 3),
        "replicas": dict(Counter(v.response_headers.get("x-replica", "direct") for v in views)),
    }


def ok(r: dict) -> bool:
    return r["errors"] == 0 and r["p95_s"] is not None and r["p95_s"] <= TARGET_P95_S


def ramp(measure, label: str) -> list[dict]:
    """``measure(n)`` for each room size in ``ROOMS`` until one misses p95 <= 6 s or has an error."""
    found = []
    for n in ROOMS:
        r = measure(n)
        found.append(r)
        print(f"  {label}, {n:>3} learners: p50 {r['p50_s']} s, p95 {r['p95_s']} s, max {r['max_s']} s, "
              f"errors {r['errors']}, {r['cpu_s_per_learner']} CPU-s per learner", flush=True)
        if not ok(r):
            break
    return found


def sustained(found: list[dict]) -> int:
    """The largest room that met the target (rooms are tried from the smallest up)."""
    return max((r["learners"] for r in found if ok(r)), default=0)


def walk(url: str, model: str | None, text: str, pids: list[int]) -> list[dict]:
    """One learner opens the ten tour steps in turn; each step's room figures (an error raises: a room would see it)."""
    steps = []
    for step in range(1, TOUR_STEPS + 1):
        r = room(url, "tour", [query(text, model, step=step)], pids)
        if r["errors"]:
            raise RuntimeError(f"tour step {step} on {model or 'the default model'}: {r['first_errors']}")
        steps.append(r)
    return steps


def wait_for_umap(log: Path, timeout: float = 120) -> bool:
    """Wait until the server's idle-time UMAP compilation is over (it would otherwise land inside a room)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if "UMAP compiled in" in log.read_text(errors="replace"):
            return True
        time.sleep(1)
    return False


def rss_mb(pid: int) -> int:
    import psutil

    return round(psutil.Process(pid).memory_info().rss / 2**20)


def per_core() -> dict:
    """One replica on one core (taskset), both models: learners sustained at p95 <= 6 s, and memory."""
    from deploy.local import free_port, start_replica, stop, wait_healthy
    from tests.browser.load import PeakRSS

    core = sorted(os.sched_getaffinity(0))[-1]
    out: dict = {"core": core, "pinning": f"taskset -c {core}, OMP_NUM_THREADS=1"}
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "replica.log"
        replica = start_replica(free_port(), log, {"OMP_NUM_THREADS": "1"}, cpus=[core])
        try:
            wait_healthy(replica.url, replica.proc, log)
            pids = [replica.proc.pid]
            out["rss_started_mb"] = rss_mb(replica.proc.pid)
            with PeakRSS(replica.proc.pid) as peak:
                for name, model in MODELS.items():
                    print(f"{name}, one replica on core {core}:", flush=True)
                    room(replica.url, "attention", [query("A warm-up sentence.", model)], pids)
                    walk(replica.url, model, "A first walk by the river bank.", pids)
                    umap = wait_for_umap(log)
                    # What the compilation's end leaves (the garbage collector's freeze) must not count for step 1.
                    time.sleep(5)
                    room(replica.url, "attention", [query("Another warm-up sentence.", model)], pids)
                    second = walk(replica.url, model, "A second walk past the old mill.", pids)
                    # The step that costs the server most CPU for a new sentence (CPU, not seconds: other processes
                    # on the machine stretch one learner's seconds at random, hardly the server's CPU-seconds).
                    step_cpu = [r["cpu_s_per_learner"] for r in second]
                    step_seconds = [r["p95_s"] for r in second]
                    step = 1 + max(range(TOUR_STEPS), key=lambda i: step_cpu[i])
                    print(f"  one learner, per tour step: CPU-s {step_cpu}, seconds {step_seconds}; the room does "
                          f"step {step}", flush=True)
                    rss_warm = rss_mb(replica.proc.pid)
                    attention = ramp(lambda n: room(replica.url, "attention",
                                                    [query(t, model) for t in texts(n, f"{n}a ")], pids),
                                     f"{name} /attention")
                    tour = ramp(lambda n: room(replica.url, "tour",
                                               [query(t, model, step=step) for t in texts(n, f"{n}t ")], pids),
                                f"{name} tour step {step}")
                    out[name] = {
                        "attention_sustained": sustained(attention), "attention": attention,
                        "tour_step": step, "tour_step_seconds_one_learner": step_seconds,
                        "tour_step_cpu_s_one_learner": step_cpu,
                        "tour_sustained": sustained(tour), "tour": tour,
                        "rss_after_warm_up_mb": rss_warm, "umap_compiled_before_rooms": umap,
                    }
            out["rss_peak_mb"] = round(peak.peak / 2**20)
            out["rss_end_mb"] = rss_mb(replica.proc.pid)
            out["server_tracebacks"] = len(re.findall(r"Traceback \(most recent call last\)", log.read_text()))
        finally:
            stop(replica.proc)
    return out


def routing_cookie(url: str) -> str:
    """A browser's first GET: nginx answers with its routing cookie."""
    jar = CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(f"{url}/tour", timeout=60) as r:
        r.read()
    return "; ".join(f"{c.name}={c.value}" for c in jar)


def two_replicas() -> dict:
    """2 replicas (one per core) behind nginx, ``TWO_REPLICA_ROOM`` learners doing every tour step together."""
    from deploy.local import deployment

    with deployment(2, env={"OMP_NUM_THREADS": "1"}, pin=True) as d:
        pids = [r.proc.pid for r in d.replicas]
        print(f"2 replicas behind nginx ({d.url}), {TWO_REPLICA_ROOM} learners:", flush=True)
        for r in d.replicas:  # each replica as a room finds it: code warm, UMAP compiled
            room(r.url, "attention", [query("A warm-up sentence.", None)], pids)
            walk(r.url, None, "A first walk by the river bank.", pids)
        umap = all([wait_for_umap(r.log_path) for r in d.replicas])
        cookies = [routing_cookie(d.url) for _ in range(TWO_REPLICA_ROOM)]
        sentences = texts(TWO_REPLICA_ROOM, "nginx ")
        steps = []
        for step in range(1, TOUR_STEPS + 1):
            r = room(d.url, "tour", [query(t, None, step=step) for t in sentences], pids, cookies)
            steps.append(r)
            print(f"  tour step {step:>2}: p50 {r['p50_s']} s, p95 {r['p95_s']} s, max {r['max_s']} s, errors "
                  f"{r['errors']}, replicas {r['replicas']}", flush=True)
        rss = [rss_mb(pid) for pid in pids]
        alive = d.nginx.poll() is None and all(r.proc.poll() is None for r in d.replicas)
    worst = max(steps, key=lambda r: r["p95_s"] if r["p95_s"] is not None else math.inf)
    return {
        "learners": TWO_REPLICA_ROOM, "worst_step": steps.index(worst) + 1, "worst_p95_s": worst["p95_s"],
        "errors": sum(r["errors"] for r in steps), "first_errors": [e for r in steps for e in r["first_errors"]][:3],
        "steps": steps, "rss_mb": rss, "umap_compiled_before_rooms": umap, "all_processes_alive": alive,
    }


def main() -> dict:
    result: dict = {"cpus": os.cpu_count(), "load_average_before": [round(x, 2) for x in os.getloadavg()],
                    "date": time.strftime("%Y-%m-%d")}
    started = time.perf_counter()
    result["one_replica_one_core"] = per_core()
    result["two_replicas_nginx"] = two_replicas()
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    result["minutes"] = round((time.perf_counter() - started) / 60, 1)
    one, two = result["one_replica_one_core"], result["two_replicas_nginx"]
    print("\nLearners one replica on one core sustains at p95 <= 6 s:")
    for name in MODELS:
        print(f"  {name}: /attention {one[name]['attention_sustained']}, tour step {one[name]['tour_step']} "
              f"{one[name]['tour_sustained']}; RSS after warm-up {one[name]['rss_after_warm_up_mb']} MB")
    print(f"  RSS peak (both models loaded): {one['rss_peak_mb']} MB")
    print(f"2 replicas behind nginx, {two['learners']} learners on the tour: worst step {two['worst_step']} "
          f"p95 {two['worst_p95_s']} s, errors {two['errors']}; RSS {two['rss_mb']} MB")
    print(f"load average before {result['load_average_before']}, after {result['load_average_after']}; "
          f"{result['minutes']} minutes")
    return result


if __name__ == "__main__":
    main()
