"""``make deploy-local N=3``: N app replicas and Debian's nginx in front of them, all on loopback.

Each replica is ``streamlit run serve.py`` with ``EXPLORER_MODE=server`` on a free 127.0.0.1 port;
nginx runs in the foreground (``daemon off``) from a temporary prefix holding its generated
configuration (``deploy/nginx.conf.template``), logs and pid file. Ctrl-C stops everything.
``tests/test_deploy.py`` uses the same functions (``deployment``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = Path(__file__).resolve().parent / "nginx.conf.template"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
PYTHON = ROOT / ".venv" / "bin" / "python"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Replica:
    """One app process: its port, url, process and log file."""

    port: int
    proc: subprocess.Popen
    log_path: Path

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.addr}"


@dataclass
class Deployment:
    """What ``deployment`` started: nginx's url and process, the replicas, and the folder with every log."""

    url: str
    nginx: subprocess.Popen
    replicas: list[Replica]
    prefix: Path
    extra: dict = field(default_factory=dict)

    def replica_by_addr(self, addr: str) -> Replica | None:
        return next((r for r in self.replicas if r.addr == addr), None)


def start_replica(port: int, log_path: Path, env: dict[str, str] | None = None,
                  cpus: list[int] | None = None) -> Replica:
    """Spawn ``streamlit run serve.py`` in server mode on ``127.0.0.1:port`` (does not wait for it).

    ``cpus``: run it under ``taskset -c`` on those cores only (every thread it starts inherits them)."""
    python = str(PYTHON if PYTHON.exists() else Path(sys.executable))
    full_env = dict(os.environ, EXPLORER_MODE="server", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                    **(env or {}))
    pin = ["taskset", "-c", ",".join(map(str, cpus))] if cpus else []
    log = open(log_path, "w")  # noqa: SIM115 - the child writes to it for its whole life
    proc = subprocess.Popen(
        [*pin, python, "-m", "streamlit", "run", "serve.py", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true"],
        cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT,
    )
    log.close()
    return Replica(port, proc, log_path)


def wait_healthy(url: str, proc: subprocess.Popen, log_path: Path, timeout: float = 180) -> None:
    """Poll ``url``'s ``/_stcore/health`` until it answers 200; raise with the log's tail if it never does."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
            raise RuntimeError(f"{url} did not become healthy (exit code {proc.poll()}):\n{tail}")
        time.sleep(0.5)


def render_config(replica_addrs: list[str], listen: str, prefix: Path) -> str:
    """``nginx.conf.template`` with the replicas, the listen address and the prefix folder filled in."""
    servers = "\n".join(f"        server {a} max_fails=1 fail_timeout=10s;" for a in replica_addrs)
    return (TEMPLATE.read_text().replace("@@SERVERS@@", servers).replace("@@LISTEN@@", listen)
            .replace("@@PREFIX@@", str(prefix)))


def start_nginx(replica_addrs: list[str], prefix: Path, port: int | None = None) -> tuple[str, subprocess.Popen]:
    """Debian's nginx in the foreground on ``127.0.0.1:port`` in front of ``replica_addrs``; returns (url, process)."""
    if not Path(NGINX).exists():
        raise FileNotFoundError(f"nginx is not installed ({NGINX}); on Debian: apt-get install nginx")
    port = port or free_port()
    conf = prefix / "nginx.conf"
    conf.write_text(render_config(replica_addrs, f"127.0.0.1:{port}", prefix))
    check = subprocess.run([NGINX, "-t", "-q", "-p", str(prefix), "-e", str(prefix / "error.log"), "-c", str(conf)],
                           capture_output=True, text=True)
    if check.returncode:
        raise RuntimeError(f"nginx rejected {conf}: {check.stderr.strip()}")
    proc = subprocess.Popen(
        [NGINX, "-p", str(prefix), "-e", str(prefix / "error.log"), "-c", str(conf),
         "-g", f"daemon off; pid {prefix / 'nginx.pid'};"],
        stdout=subprocess.DEVNULL, stderr=open(prefix / "nginx.stderr", "w"),  # noqa: SIM115 - nginx writes to it for its whole life
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return url, proc
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("nginx did not start: " + (prefix / "error.log").read_text(errors="replace")[-2000:])
        time.sleep(0.2)


def start_redis(folder: Path, port: int | None = None) -> tuple[str, subprocess.Popen]:
    """Debian's ``redis-server`` on ``127.0.0.1:port`` (a free one by default), its files in ``folder``, for the rooms
    every replica shares (``EXPLORER_ROOM_STORE``); returns ``(redis://… url, process)`` once it answers PING.
    Append-only file, fsync on every write: an entry Redis acknowledged survives Redis's own restart."""
    if not Path(REDIS_SERVER).exists():
        raise FileNotFoundError(f"redis-server is not installed ({REDIS_SERVER}); on Debian: apt-get install redis-server")
    port = port or free_port()
    proc = subprocess.Popen([REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
                             "--save", "", "--appendonly", "yes", "--appendfsync", "always"],
                            stdout=subprocess.DEVNULL, stderr=open(folder / "redis.log", "w"))  # noqa: SIM115 - redis writes to it for its whole life
    deadline = time.monotonic() + 20
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            if s.recv(16).startswith(b"+PONG"):
                return f"redis://127.0.0.1:{port}/0", proc
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError("redis-server did not start: " + (folder / "redis.log").read_text(errors="replace")[-2000:])
        time.sleep(0.1)


def stop(proc: subprocess.Popen, timeout: float = 10) -> None:
    """Terminate ``proc`` and its children (nginx's workers); kill what is left after ``timeout``."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(psutil.NoSuchProcess):
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        for p in family:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.terminate()
        _gone, alive = psutil.wait_procs(family, timeout=timeout)
        for p in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
    proc.wait()


@contextlib.contextmanager
def deployment(n: int, prefix: Path | None = None, port: int | None = None,
               env: dict[str, str] | None = None, pin: bool = False, redis: bool = False) -> Iterator[Deployment]:
    """``n`` healthy replicas behind nginx; everything is stopped on exit. Logs stay in ``prefix``.

    ``pin``: replica i runs on core i only (``taskset``; modulo the cores this process may use), one replica per core.
    ``redis``: a redis-server on loopback too, and every replica's workshop rooms in it (``extra["redis"]``: its url,
    ``extra["redis_proc"]``: its process)."""
    owned = prefix is None
    prefix = Path(tempfile.mkdtemp(prefix="explorer-deploy-")) if owned else prefix
    prefix.mkdir(parents=True, exist_ok=True)
    os.chmod(prefix, 0o755)  # nginx's workers (user nobody when started as root) write temp files here
    replicas: list[Replica] = []
    nginx = None
    extra: dict = {}
    try:
        if redis:
            extra["redis"], extra["redis_proc"] = start_redis(prefix)
            env = dict(env or {}, EXPLORER_ROOM_STORE=extra["redis"])
        cores = sorted(os.sched_getaffinity(0))
        for i in range(n):
            cpus = [cores[i % len(cores)]] if pin else None
            replicas.append(start_replica(free_port(), prefix / f"replica-{i}.log", env, cpus))
        for r in replicas:
            wait_healthy(r.url, r.proc, r.log_path)
        url, nginx = start_nginx([r.addr for r in replicas], prefix, port)
        yield Deployment(url, nginx, replicas, prefix, extra)
    finally:
        for proc in ([nginx] if nginx else []) + [r.proc for r in replicas] + [p for k, p in extra.items() if k == "redis_proc"]:
            stop(proc)
        if owned and not os.environ.get("EXPLORER_KEEP_DEPLOY_LOGS"):
            shutil.rmtree(prefix, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--replicas", type=int, default=int(os.environ.get("N", "2")))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8080")), help="nginx's port (127.0.0.1)")
    parser.add_argument("--redis", action="store_true", default=os.environ.get("REDIS", "") not in ("", "0"),
                        help="start redis-server on loopback and share workshop rooms through it (REDIS=1)")
    args = parser.parse_args(argv)
    print(f"Starting {args.replicas} replicas (each loads the bundled model; about 20-60 s)...", flush=True)
    with deployment(args.replicas, port=args.port, redis=args.redis) as d:
        if args.redis:
            print(f"  redis-server {d.extra['redis']} (workshop rooms of every replica)")
        for r in d.replicas:
            print(f"  replica {r.url}  log {r.log_path}")
        print(f"nginx: {d.url}  (logs in {d.prefix}); Ctrl-C stops everything.", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while all(p.poll() is None for p in [d.nginx, *(r.proc for r in d.replicas)]):
                time.sleep(1)
            print("A process exited; stopping the rest.", file=sys.stderr)


if __name__ == "__main__":
    main()
