"""A real ``redis-server`` on a free loopback port for the room store's tests (``scripts/ensure_redis.sh`` installs
Debian's; without it the tests skip, and under CI=1 they fail). Import the fixtures into a test module."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(folder: Path) -> tuple[str, subprocess.Popen]:
    """``redis-server`` on 127.0.0.1 on a free port, its files in ``folder``; returns (url, process) once it answers.
    Append-only file with fsync every write: what a test that kills the server expects."""
    if not Path(REDIS_SERVER).exists():
        reason = "redis-server is not installed (make test installs it as root: scripts/ensure_redis.sh)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    port = free_port()
    proc = subprocess.Popen([REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
                             "--save", "", "--appendonly", "yes", "--appendfsync", "always"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return f"redis://127.0.0.1:{port}/0", proc
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"redis-server did not start on port {port}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    url, proc = start_redis(tmp_path_factory.mktemp("redis"))
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
