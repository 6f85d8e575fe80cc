"""``mace serve`` outlives its PostgreSQL (issue 28, point 1), in its own process, on a cluster
of the test's own that it stops and starts (the session's shared server is never stopped).

Under light load (client threads recording jobs), the test stops PostgreSQL and measures how long
``/readyz`` and a store route take to answer 503 ``STORE_UNAVAILABLE`` (at most
``MACE_CONNECT_TIMEOUT`` plus a second, while ``/healthz`` keeps answering), starts PostgreSQL
again and measures how long the same process takes to be ready and to record again, then stops
PostgreSQL once more and measures how long SIGTERM takes to stop the service (at most 10 s, exit
0). Every write the service acknowledged is in the store afterwards, and the store verifies.

Marked ``end_to_end``: slow (a service process and a cluster of its own), but in the default run.
The seconds measured are printed (``pytest -s``).
"""

from __future__ import annotations

import itertools
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from support.ledger_fixtures import settings_for
from support.postgres_server import restartable_cluster

from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.tooling.load_server import TENANT, ServiceProcess, make_token

pytestmark = pytest.mark.end_to_end

CONNECT_TIMEOUT = 2
ANSWER_BOUND = CONNECT_TIMEOUT + 1.0
"""The issue's bound: a request the store cannot serve is answered 503 within this."""
STOP_BOUND = 10.0
RECOVERY_DEADLINE = 30.0
CLIENT_THREADS = 3
POLL_SECONDS = 0.05
CLIENT_TIMEOUT = 60.0
"""Far above every bound: a client that waits this long has met a hang, and says so."""


@dataclass
class Load:
    """Client threads recording jobs until told to stop: what was acknowledged, what failed."""

    client: Callable[[], httpx.Client]
    acknowledged: list[str] = field(default_factory=list)
    refused: list[tuple[int, str, float]] = field(default_factory=list)
    hung: list[str] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    outage_at: float = 0.0
    """When the database last went away (`time.monotonic`): a refusal's seconds count from
    then, for a request sent before it (in flight as the database went) as for one sent after."""
    numbers: Iterator[int] = field(default_factory=itertools.count)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def post_jobs(self) -> None:
        with self.client() as client:
            while not self.stopping.is_set():
                with self.lock:
                    number = next(self.numbers)
                started = time.monotonic()
                try:
                    answer = client.post("/v1/jobs", json={"input": f"{number} + 1", "seed": "s"})
                except httpx.TimeoutException as exc:
                    self.hung.append(repr(exc))
                    continue
                except httpx.TransportError:
                    continue  # the service stopped (the test's SIGTERM)
                with self.lock:
                    if answer.status_code == 201:
                        self.acknowledged.append(answer.json()["job_id"])
                    else:
                        code = answer.json()["error"]["code"]
                        since = max(started, self.outage_at)
                        self.refused.append((answer.status_code, code, time.monotonic() - since))

    def count(self) -> int:
        with self.lock:
            return len(self.acknowledged)


def until(what: str, check: Callable[[], bool], deadline: float) -> float:
    """Poll ``check`` until it holds; the seconds it took (fails past ``deadline`` seconds)."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > deadline:
            pytest.fail(f"{what}: not within {deadline} s")
        time.sleep(POLL_SECONDS)
    return time.monotonic() - started


def timed(request: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    answer = request()
    return answer, time.monotonic() - started


def unavailable(answer: httpx.Response) -> bool:
    return answer.status_code == 503 and answer.json()["error"]["code"] == "STORE_UNAVAILABLE"


def test_the_service_outlives_its_database(tmp_path: Path) -> None:
    with restartable_cluster() as cluster:
        if cluster is None or cluster.server is None:
            pytest.skip("no PostgreSQL server binaries on this machine")
        settings: Settings = settings_for(cluster.server.url).model_copy(
            update={"checkpoint_interval": 0.2, "connect_timeout": CONNECT_TIMEOUT}
        )
        with Ledger.open(settings):
            pass  # the store's tables, as `mace init` makes them
        token = make_token(tmp_path / "tokens.json")
        headers = {"Authorization": f"Bearer {token}"}
        log = tmp_path / "serve.log"
        with ServiceProcess(settings, tmp_path / "tokens.json", log) as service:
            service.start()
            process = service.process
            assert process is not None

            def client() -> httpx.Client:
                return httpx.Client(
                    base_url=service.base_url, headers=headers, timeout=CLIENT_TIMEOUT
                )

            load = Load(client)
            threads = [threading.Thread(target=load.post_jobs) for _ in range(CLIENT_THREADS)]
            for thread in threads:
                thread.start()
            try:
                with client() as probe:
                    until("jobs recorded under load", lambda: load.count() >= 5, 60)

                    # 1. PostgreSQL goes away.
                    # Each request is sent once the server is down: its seconds are the
                    # seconds from the outage to its answer.
                    load.outage_at = time.monotonic()
                    cluster.shut_down("fast")
                    ready, ready_seconds = timed(lambda: probe.get("/readyz"))
                    listing, listing_seconds = timed(lambda: probe.get("/v1/jobs"))
                    health, health_seconds = timed(lambda: probe.get("/healthz"))
                    assert unavailable(ready), ready.content
                    assert unavailable(listing), listing.content
                    assert health.status_code == 200, health.content
                    write, write_seconds = timed(
                        lambda: probe.post("/v1/jobs", json={"input": "7 * 6", "seed": "down"})
                    )
                    assert unavailable(write), write.content

                    # 2. It comes back: the same process recovers by itself.
                    cluster.start_again()
                    back = time.monotonic()
                    until("/readyz 200", lambda: probe.get("/readyz").status_code == 200, 30)
                    mark = load.count()
                    until("a job recorded again", lambda: load.count() > mark, RECOVERY_DEADLINE)
                    recovery_seconds = time.monotonic() - back

                    # 3. It goes away again, and the service is stopped.
                    load.outage_at = time.monotonic()
                    cluster.shut_down("immediate")
                    until("a write refused", lambda: unavailable(probe.get("/readyz")), 10)
                    process.send_signal(signal.SIGTERM)
                    stop_seconds = until(
                        "the service stopped", lambda: process.poll() is not None, 30
                    )
            finally:
                load.stopping.set()
                for thread in threads:
                    thread.join(timeout=CLIENT_TIMEOUT)
            print(  # noqa: T201 - the figures the issue asks for, with -s
                f"\noutage figures (MACE_CONNECT_TIMEOUT={CONNECT_TIMEOUT}):"
                f" /readyz {ready_seconds:.2f} s, GET /v1/jobs {listing_seconds:.2f} s,"
                f" POST /v1/jobs {write_seconds:.2f} s, /healthz {health_seconds:.2f} s;"
                f" recovery {recovery_seconds:.2f} s; SIGTERM to exit {stop_seconds:.2f} s;"
                f" acknowledged {len(load.acknowledged)}, refused {len(load.refused)},"
                f" slowest refusal {max((r[2] for r in load.refused), default=0):.2f} s"
            )
            assert process.returncode == 0, service.log_tail()
        assert load.hung == []
        for seconds in (ready_seconds, listing_seconds, write_seconds):
            assert seconds <= ANSWER_BOUND
        assert health_seconds < 1.0
        assert stop_seconds <= STOP_BOUND
        assert {(status, code) for status, code, _ in load.refused} <= {(503, "STORE_UNAVAILABLE")}
        assert max((seconds for _, _, seconds in load.refused), default=0) <= ANSWER_BOUND
        assert "Traceback" not in log.read_text()

        # Every acknowledged write is in the store, and the store verifies.
        cluster.start_again()
        with Ledger.open(settings, create=False, checkpoint_on_close=False) as ledger:
            lost = [j for j in load.acknowledged if not ledger.jobs.exists(j, tenant=TENANT)]
            assert lost == []
            verified = ledger.checkpoints.verify_ledger()
            assert verified.verification.events > 0
