"""Two replicas behind nginx (deploy/local.py): sticky sessions, and a replica killed in the middle of a run.

Clients speak Streamlit's own websocket protocol (bench/protocol.py), each with its own cookie jar, as a
browser does: a GET of the page (nginx sets the routing cookie), then the websocket with that cookie.
Which replica answered is nginx's ``X-Replica`` header ($upstream_addr), checked against nginx's access log.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
import urllib.request
from dataclasses import dataclass
from http.cookiejar import CookieJar
from pathlib import Path
from urllib.parse import urlencode

import pytest

from bench.protocol import PageView, run_apart, view_page
from deploy.local import NGINX, Deployment, deployment

pytestmark = pytest.mark.deploy

PAGE = "attention"
SESSIONS = 60
TIMEOUT = 120.0


@dataclass
class Session:
    """One browser: its cookie jar, the replica that served its page and the one that served its websocket."""

    jar: CookieJar
    query: dict[str, str]
    page_replica: str = ""
    view: PageView | None = None

    @property
    def cookie(self) -> str:
        return "; ".join(f"{c.name}={c.value}" for c in self.jar)

    @property
    def ws_replica(self) -> str:
        return _last_upstream(self.view.response_headers.get("x-replica", "")) if self.view else ""


def _last_upstream(upstream_addr: str) -> str:
    """``$upstream_addr`` lists every replica tried ("a, b"); the last one answered."""
    return upstream_addr.split(",")[-1].strip()


def _get_page(session: Session, url: str) -> None:
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(session.jar))
    with opener.open(f"{url}/{PAGE}?{urlencode(session.query)}", timeout=30) as r:
        assert r.status == 200
        session.page_replica = _last_upstream(r.headers.get("X-Replica", ""))


async def _browse(session: Session, url: str, *, load_page: bool = True, on_open=None) -> Session:
    """The page (unless already loaded), then its websocket session with the jar's cookie."""
    if load_page:
        await asyncio.to_thread(_get_page, session, url)
    session.view = await view_page(url, PAGE, session.query, timeout=TIMEOUT, headers={"Cookie": session.cookie},
                                   on_open=on_open)
    return session


def _run_all(coros, timeout: float) -> list:
    """Run ``coros`` at the same moment; fail if they take longer than ``timeout`` altogether."""
    async def together():
        return await asyncio.wait_for(asyncio.gather(*coros), timeout)
    return run_apart(together())


def _texts(n: int) -> list[str]:
    words = ["apple", "river", "guitar", "planet", "pencil", "tiger", "castle", "rocket", "violin", "garden"]
    return [f"The {words[i % len(words)]} rested by gate {i // len(words) + 1}." for i in range(n)]


def _routes_in_access_log(prefix: Path) -> dict[str, set[str]]:
    """nginx's own record: routing cookie -> the replicas that answered it."""
    routes: dict[str, set[str]] = {}
    for line in (prefix / "access.log").read_text().splitlines():
        m = re.search(r"route=(\S+) upstream=(.+?) upstream_status=", line)
        if m and m.group(2) != "-":
            routes.setdefault(m.group(1), set()).add(_last_upstream(m.group(2)))
    return routes


@pytest.fixture(scope="module")
def deployed(tmp_path_factory) -> Deployment:
    if not Path(NGINX).exists():
        message = f"nginx is not installed at {NGINX}: run scripts/ensure_nginx.sh (apt-get install nginx)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with deployment(2, prefix=tmp_path_factory.mktemp("deploy")) as d:
        # One view on each replica directly: the model load is start-up's business, not this test's.
        warm = _run_all([view_page(r.url, PAGE, {"text": "A warm-up."}, timeout=TIMEOUT) for r in d.replicas], TIMEOUT)
        assert all(not v.errors for v in warm), [v.errors for v in warm]
        yield d


def test_sessions_stay_on_one_replica_and_survive_a_replica_dying(deployed: Deployment):
    d = deployed
    addrs = {r.addr for r in d.replicas}

    # 1. Sixty browsers at once: each stays on one replica, both replicas serve.
    sessions = [Session(CookieJar(), {"text": t}) for t in _texts(SESSIONS)]
    _run_all([_browse(s, d.url) for s in sessions], 3 * TIMEOUT)
    assert [s.view.errors for s in sessions if s.view.errors] == []
    assert all(s.view.script_runs >= 1 and s.view.texts for s in sessions)
    assert all(s.cookie.startswith("explorer_route=") for s in sessions)
    assert [(s.page_replica, s.ws_replica) for s in sessions if s.page_replica != s.ws_replica] == []
    served = {s.ws_replica for s in sessions}
    assert served == addrs, served
    logged = _routes_in_access_log(d.prefix)
    for s in sessions:
        route = s.cookie.split("=", 1)[1]
        assert logged[route] == {s.ws_replica}, (route, logged[route])

    # 2. Twenty of them open their page again; one replica is killed while their websockets are open.
    again = sessions[:20]
    victim = d.replica_by_addr(again[0].ws_replica)
    survivor = next(r for r in d.replicas if r is not victim)
    on_victim = [s for s in again if s.ws_replica == victim.addr]
    on_survivor = [s for s in again if s.ws_replica == survivor.addr]
    assert on_victim and on_survivor
    reference = {s.query["text"]: s.view.texts for s in sessions}

    async def run_and_kill() -> float:
        # Killed as soon as every one of the victim's websockets is open (not after a fixed delay: on a loaded
        # machine some might not have connected yet, and nginx would send them to the survivor instead).
        opened: list[Session] = []
        all_open = asyncio.Event()

        def opener(s: Session):
            def on_open():
                if any(s is v for v in on_victim):
                    opened.append(s)
                    if len(opened) == len(on_victim):
                        all_open.set()
            return on_open

        tasks = [asyncio.create_task(_browse(s, d.url, load_page=False, on_open=opener(s))) for s in again]
        await asyncio.wait_for(all_open.wait(), TIMEOUT)
        victim.proc.send_signal(signal.SIGKILL)
        killed_at = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*tasks), 2 * TIMEOUT)
        return killed_at

    started = time.perf_counter()
    killed_at = run_apart(run_and_kill()) - started
    victim.proc.wait(timeout=10)
    print(f"killed {victim.addr} after {killed_at:.2f} s; its {len(on_victim)} sessions: "
          f"{sum(bool(s.view.errors) for s in on_victim)} cut off; survivor's {len(on_survivor)} finished after "
          f"{sorted(round(s.view.seconds, 2) for s in on_survivor)} s")
    # The kill cut live sessions: the victim's websockets were open (a client waits 1.5 s of quiet before closing).
    assert any(s.view.errors for s in on_victim)
    assert all(s.view.response_headers.get("x-replica") == victim.addr for s in on_victim)
    # The survivor's sessions finished without an error and showed their own text.
    assert [s.view.errors for s in on_survivor if s.view.errors] == []
    assert all(s.view.texts == reference[s.query["text"]] for s in on_survivor)

    # 3. New browsers after the kill all get the survivor, without an error.
    fresh = [Session(CookieJar(), {"text": t}) for t in _texts(SESSIONS + 10)[SESSIONS:]]
    _run_all([_browse(s, d.url) for s in fresh], 2 * TIMEOUT)
    assert [s.view.errors for s in fresh if s.view.errors] == []
    assert {s.page_replica for s in fresh} == {s.ws_replica for s in fresh} == {survivor.addr}

    # 4. The killed replica's browsers reconnect with the same cookie (a browser reloads the same URL)
    #    and the survivor rebuilds each view from the URL alone: the same sentences as before the kill.
    cookies_before = [s.cookie for s in on_victim]
    _run_all([_browse(s, d.url) for s in on_victim], 2 * TIMEOUT)
    assert [s.cookie for s in on_victim] == cookies_before
    assert [s.view.errors for s in on_victim if s.view.errors] == []
    assert {s.page_replica for s in on_victim} == {s.ws_replica for s in on_victim} == {survivor.addr}
    assert all(s.view.texts == reference[s.query["text"]] for s in on_victim)
    assert d.nginx.poll() is None and survivor.proc.poll() is None
