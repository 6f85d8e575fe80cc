"""The bench's ``http runs`` figure: runs recorded over HTTP in batches, as an emitter sends them.

``mace serve`` runs over the bench's store in its own process (`load_server.ServiceProcess`);
one client sends ``runs`` runs, each opened, then its events in batches of ``batch`` events
(`HTTP_BATCHES` batches a run), then completed, and the figure is the events recorded a second,
from the first request to the last answer, and the processor time of the client and the service
meanwhile (the service's read from ``/proc``; the statements it sent are its process's, not
counted). Its raw baseline (``--compare-raw``) inserts the rows
the service stored with plain INSERTs in as many commits as the client made requests, each one
its own transaction on the service (`bench_raw`).

`served` starts the service, times what a client sends it and reads what the service stored and
spent: the ``otlp spans`` figure (`bench_otlp`) is measured the same way.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import httpx

from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.tooling.load_server import ServiceProcess, make_token
from infrastructure.tooling.load_workload import PlannedRun, Workload, plan_runs

HTTP_BATCHES: Final = 2
"""Batches a run is sent in: its events then come in batches of the figure's batch size."""
TIMEOUT_SECONDS: Final = 60.0


class HttpRunsError(RuntimeError):
    """A request of the figure did not get the answer every recorded run gets."""


@dataclass(frozen=True, slots=True)
class Served:
    """What a client sent a service over HTTP (``count`` units, in ``commits`` transactions of
    the service) and the service stored (``rows_written`` rows after notification
    ``written_after``), how long it took, and the processor seconds the client and the service
    spent meanwhile (None: the system does not say the service's: no ``/proc``)."""

    count: int
    seconds: float
    rows_written: int
    commits: int
    written_after: int
    cpu_seconds: float | None


def cpu_of(pid: int) -> float | None:
    """A process's processor seconds so far, user and system (Linux's ``/proc``)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # Fields 14 and 15 of stat(5), counted after the parenthesised command name (field 2).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def served(
    ledger: Ledger,
    settings: Settings,
    send: Callable[[httpx.Client], tuple[int, int]],
    content_type: str,
    environment: Mapping[str, str] | None = None,
) -> Served:
    """Start the service over the ledger's store (``environment`` set in its own), time
    ``send`` (which answers the units it sent and the service's commits), stop it."""
    with tempfile.TemporaryDirectory(prefix="mace-bench-") as scratch:
        tokens = Path(scratch) / "tokens.json"
        token = make_token(tokens)
        with ServiceProcess(settings, tokens, Path(scratch) / "serve.log") as service:
            service.environment.update(environment or {})
            service.start()
            head = ledger.status.head()
            headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type}
            with httpx.Client(
                base_url=service.base_url, headers=headers, timeout=TIMEOUT_SECONDS
            ) as client:
                assert service.process is not None
                pid = service.process.pid
                before, own = cpu_of(pid), time.process_time()
                started = time.perf_counter()
                count, commits = send(client)
                seconds = time.perf_counter() - started
                after, own = cpu_of(pid), time.process_time() - own
    written = ledger.status.head() - head
    cpu = None if before is None or after is None else own + after - before
    return Served(count, seconds, written, commits, head, cpu)


def http_runs(ledger: Ledger, settings: Settings, runs: int, batch: int) -> Served:
    """Send the runs to the service; ``runs`` must be recorded whole. The service commits
    each request on its own."""
    workload = Workload(clients=1, runs=runs, events=batch * HTTP_BATCHES, replays=0)
    planned = plan_runs(workload, secrets.token_hex(4), ledger.snapshots.default_ids())

    def send(client: httpx.Client) -> tuple[int, int]:
        requests = sum(_send(client, run) for run in planned)
        return sum(len(run.digests) for run in planned), requests

    return served(ledger, settings, send, "application/json")


def _send(client: httpx.Client, run: PlannedRun) -> int:
    """Open the run, send its batches, complete it; the number of requests it took."""
    _post(client, "/v1/runs", run.open_body, 201)
    for body in run.batch_bodies:
        _post(client, f"/v1/runs/{run.run_id}/events", body, 200)
    _post(client, f"/v1/runs/{run.run_id}/complete", run.complete_body, 200)
    return len(run.batch_bodies) + 2


def _post(client: httpx.Client, path: str, body: bytes, expected: int) -> None:
    answer = client.post(path, content=body)
    if answer.status_code != expected:
        text = " ".join(answer.text.split())[:200]
        msg = f"POST {path} answered {answer.status_code}, not {expected}: {text}"
        raise HttpRunsError(msg)
