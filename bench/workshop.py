"""Workshop load: 40 sessions open ``/attention`` at the same moment, each with its own 12-token text.

A protocol-level client (``bench/protocol.py``: Streamlit's own websocket messages, no browsers),
so the figures are the server's: p50/p95/max seconds from connecting to the session's last
``script_finished``, errors, and the server's peak RSS. Target: p95 <= 6 s, no errors.

Run with ``python -m bench workshop``; it starts its own server on a free localhost port.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import tempfile
import time
from pathlib import Path

from bench import cpu_seconds

SESSIONS = 40
PAGE = "attention"


def session_texts(n: int = SESSIONS) -> list[str]:
    """``n`` distinct texts of 12 tokens on the bundled model ([CLS] and [SEP] included)."""
    words = ["apple", "river", "guitar", "planet", "pencil", "tiger", "castle", "rocket", "violin", "garden"]
    return [f"The {words[i % len(words)]} was left beside door {i // len(words) + 1} today." for i in range(n)]


def main() -> dict:
    from bench.protocol import view_pages
    from tests.browser.conftest import serve_app
    from tests.browser.load import PeakRSS, percentile

    texts = session_texts()
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "server.log"
        with serve_app(log_path) as (url, proc), PeakRSS(proc.pid) as rss:
            # One warm-up view: the model load and first imports are `bench startup`'s business.
            warm = asyncio.run(view_pages(url, PAGE, [{"text": "A warm-up sentence."}]))[0]
            idle_rss = rss.process.memory_info().rss
            cpu_before = cpu_seconds(rss.process.pid)
            started = time.perf_counter()
            views = asyncio.run(view_pages(url, PAGE, [{"text": t} for t in texts]))
            wall = time.perf_counter() - started
            server_cpu = cpu_seconds(rss.process.pid) - cpu_before
        log = log_path.read_text()
    finished = sorted(v.seconds for v in views if not math.isnan(v.seconds))
    errors = [e for v in views for e in v.errors] + [f"warm-up: {e}" for e in warm.errors]
    tracebacks = len(re.findall(r"Traceback \(most recent call last\)", log))
    result = {
        "sessions": SESSIONS,
        "page": f"/{PAGE}",
        "sessions_finished": len(finished),
        "p50_seconds": round(percentile(finished, 50), 2) if finished else None,
        "p95_seconds": round(percentile(finished, 95), 2) if finished else None,
        "max_seconds": round(finished[-1], 2) if finished else None,
        "wall_seconds": round(wall, 2),
        "errors": len(errors),
        "first_errors": errors[:5],
        "server_tracebacks": tracebacks,
        # UMAP's compilation (about 10 CPU-s holding the interpreter) waits for an idle server; it should not start here.
        "umap_compiled_during_run": "compiling UMAP" in log,
        "script_runs_per_session": round(sum(v.script_runs for v in views) / SESSIONS, 2),
        "kb_received_per_session": round(sum(v.bytes_received for v in views) / SESSIONS / 1024, 1),
        "server_cpu_seconds": round(server_cpu, 1),
        "server_cpu_seconds_per_session": round(server_cpu / SESSIONS, 3),
        "server_rss_idle_mb": round(idle_rss / 2**20),
        "server_peak_rss_mb": round(rss.peak / 2**20),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS", "unset"),
        "cpus": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
    }
    for key, value in result.items():
        print(f"{key:>32}: {value}")
    return result


if __name__ == "__main__":
    main()
