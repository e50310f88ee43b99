"""A real ``redis-server`` on a free loopback port for the room store's tests (``scripts/ensure_redis.sh`` installs
Debian's; without it the tests skip, and under CI=1 they fail). Import the fixtures into a test module."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from deploy.local import REDIS_SERVER
from deploy.local import start_redis as deploy_redis


def start_redis(folder: Path) -> tuple[str, subprocess.Popen]:
    """``deploy.local.start_redis``, skipped without redis-server (failed under CI)."""
    if not Path(REDIS_SERVER).exists():
        reason = "redis-server is not installed (make test installs it as root: scripts/ensure_redis.sh)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return deploy_redis(folder)


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    url, proc = start_redis(tmp_path_factory.mktemp("redis"))
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
