"""Load: 20 concurrent browser sessions on one server (p50/p95 time to their own figure, peak RSS).

Run with ``python -m bench load``. Needs Debian's chromium (``make test`` installs it as root).
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

from bench import cpu_seconds

SESSIONS = 20


def main() -> dict:
    from tests.browser.conftest import CHROMIUM, CHROMIUM_FLAGS, serve_app
    from tests.browser.load import PeakRSS, percentile, run_load

    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "server.log"
        with serve_app(log_path) as (url, proc), PeakRSS(proc.pid) as rss:
            idle_rss = rss.process.memory_info().rss
            cpu_before = cpu_seconds(rss.process.pid)
            started = time.perf_counter()
            results = run_load(url, SESSIONS, executable=CHROMIUM, args=CHROMIUM_FLAGS)
            wall = time.perf_counter() - started
            server_cpu = cpu_seconds(rss.process.pid) - cpu_before
        loads = re.findall(r"loaded model (\S+) in", log_path.read_text())
    times = sorted(r.seconds for r in results)
    result = {
        "sessions": SESSIONS,
        "correct_sessions": sum(r.own_word_shown and not r.errors for r in results),
        "sessions_with_foreign_text": sum(bool(r.foreign_words) for r in results),
        "p50_seconds": round(percentile(times, 50), 2),
        "p95_seconds": round(percentile(times, 95), 2),
        "max_seconds": round(times[-1], 2),
        "wall_seconds": round(wall, 2),
        "model_loads": len(loads),
        # The 20 browsers share the machine's cores with the server: this is the server's own share.
        "server_cpu_seconds": round(server_cpu, 1),
        "server_cpu_seconds_per_session": round(server_cpu / SESSIONS, 2),
        "server_rss_before_mb": round(idle_rss / 2**20),
        "server_peak_rss_mb": round(rss.peak / 2**20),
    }
    for key, value in result.items():
        print(f"{key:>28}: {value}")
    return result


if __name__ == "__main__":
    main()
