"""``mace loadtest``: a bounded load on the HTTP service, then a read-back of what it stored.

Three phases, all under one hard deadline (``--timeout``):

1. Setup, not timed. Open the ledger ``MACE_STORE`` names (a store or key problem is a plain error
   before anything starts), store the Stage-0 default snapshots, plan and encode every run (see
   `infrastructure.tooling.load_workload`), write a throwaway tokens file and start ``mace serve``
   on a free loopback port (see `infrastructure.tooling.load_server`),
   ready when ``/readyz`` says so.
2. Load, timed. ``clients`` threads, each with its own keep-alive ``httpx.Client``, take runs
   from one queue until none is left. A run is ``POST /v1/runs``, its event batches, one batch
   sent again (it must come back as all duplicates), ``POST .../complete``; a run chosen for a
   replay then gets ``POST /replay/request`` (audit) from the same client. Each request is timed
   with ``time.perf_counter`` around the call, answer read. A request that fails (another status
   than expected, a transport error, the deadline) is counted and its run abandoned: no retries,
   so every failure shows. Answers are checked too (counts, ``ok``, ``authoritative``).
3. Stop the service, then read back through the ledger (see `infrastructure.tooling.load_verify`).

The report is canonical JSON; latencies are in milliseconds, nearest-rank percentiles. It is
``ok`` only when nothing failed, nothing timed out and the read-back found everything sent.
"""

from __future__ import annotations

import math
import queue
import secrets
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import httpx
import orjson

from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.tooling.load_server import TENANT, ServiceProcess, make_token
from infrastructure.tooling.load_verify import Verification, VerificationTimeout, verify_store
from infrastructure.tooling.load_workload import PlannedRun, Workload, plan_runs

KINDS = ("open", "batch", "complete", "replay")
"""The endpoint kinds latencies are reported for (a re-sent batch is a batch)."""
MAX_SAMPLES = 10
"""How many failed requests and wrong answers the report quotes (all are counted)."""
JOIN_GRACE_SECONDS = 5.0


class _Abandoned(Exception):
    """This run's request failed: the client goes on with the next run."""


@dataclass
class _Tally:
    """What one client saw; merged after the load."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)
    wrong_answers: list[str] = field(default_factory=list)
    wrong_answer_count: int = 0
    retried: Counter[str] = field(default_factory=Counter)
    attempts: dict[str, int] = field(default_factory=dict)
    acknowledged: set[str] = field(default_factory=set)
    requests: int = 0
    events_recorded: int = 0

    def merge(self, other: _Tally) -> None:
        for kind in KINDS:
            self.latencies[kind].extend(other.latencies[kind])
        self.errors.update(other.errors)
        self.retried.update(other.retried)
        self.error_samples = [*self.error_samples, *other.error_samples][:MAX_SAMPLES]
        self.wrong_answers = [*self.wrong_answers, *other.wrong_answers][:MAX_SAMPLES]
        self.wrong_answer_count += other.wrong_answer_count
        self.attempts.update(other.attempts)
        self.acknowledged |= other.acknowledged
        self.requests += other.requests
        self.events_recorded += other.events_recorded


class _Client:
    """One client thread: runs from the queue, one keep-alive connection, every call timed."""

    def __init__(
        self, http: httpx.Client, deadline: float, stop: threading.Event, retries: int
    ) -> None:
        self.http = http
        self.deadline = deadline
        self.stop = stop
        self.retries = retries
        self.tally = _Tally()

    def work(self, todo: queue.Queue[PlannedRun]) -> None:
        while not self.stop.is_set():
            try:
                run = todo.get_nowait()
            except queue.Empty:
                return
            try:
                self.drive(run)
            except _Abandoned:
                continue

    def drive(self, run: PlannedRun) -> None:
        answer = self.call("open", run.run_id, "/v1/runs", run.open_body, 201)
        self.expect(run, "open", answer, {"status": "open", "events": 0})
        path = f"/v1/runs/{run.run_id}/events"
        for body, size in zip(run.batch_bodies, run.batch_sizes, strict=True):
            answer = self.call("batch", run.run_id, path, body, 200)
            self.expect(run, "batch", answer, {"accepted": size, "duplicates": 0})
        size = run.batch_sizes[run.resend]
        answer = self.call("batch", run.run_id, path, run.batch_bodies[run.resend], 200)
        self.expect(run, "re-sent batch", answer, {"accepted": 0, "duplicates": size})
        path = f"/v1/runs/{run.run_id}/complete"
        answer = self.call("complete", run.run_id, path, run.complete_body, 200)
        events = len(run.digests)
        self.expect(run, "complete", answer, {"job_id": run.run_id, "events": events})
        self.expect(run, "complete", answer, {"replayable": True})
        self.tally.acknowledged.add(run.run_id)
        self.tally.events_recorded += events
        if run.replay_body is not None:
            answer = self.call("replay", run.run_id, "/replay/request", run.replay_body, 200)
            expected = {"ok": True, "authoritative": run.authoritative}
            self.expect(run, "replay", answer, expected)
            if isinstance(answer.get("attempt"), int):
                self.tally.attempts[run.run_id] = answer["attempt"]

    def call(self, kind: str, run_id: str, path: str, body: bytes, expected: int) -> Any:
        """POST ``body``: the decoded answer; `_Abandoned` (counted) if it is not ``expected``.

        An answer that asks to try again is re-sent, up to ``retries`` times (each counted).
        """
        retried = 0
        while True:
            response = self.post(kind, run_id, path, body)
            if response.status_code == expected:
                try:
                    return orjson.loads(response.content)
                except orjson.JSONDecodeError:
                    self.fail("not-json", f"{kind} {run_id}: the answer is not JSON")
            status = str(response.status_code)
            if retried == self.retries or not _asks_to_try_again(response):
                self.fail(status, f"{kind} {run_id}: {status} {_error_text(response)}")
            retried += 1
            self.tally.retried[status] += 1

    def post(self, kind: str, run_id: str, path: str, body: bytes) -> httpx.Response:
        """One timed request; `_Abandoned` (counted) when there is no answer."""
        remaining = self.deadline - time.perf_counter()
        if remaining <= 0 or self.stop.is_set():
            self.stop.set()
            self.fail("deadline", f"{kind} {run_id}: the deadline passed")
        self.tally.requests += 1
        started = time.perf_counter()
        try:
            response = self.http.post(path, content=body, timeout=remaining)
        except httpx.TimeoutException:
            self.fail("timeout", f"{kind} {run_id}: no answer before the deadline")
        except httpx.TransportError as exc:
            self.fail("transport", f"{kind} {run_id}: {type(exc).__name__}: {exc}")
        self.tally.latencies[kind].append(time.perf_counter() - started)
        return response

    def fail(self, status: str, message: str) -> NoReturn:
        """Count a failed request by its status (or what kept it from having one) and give up."""
        self.tally.errors[status] += 1
        if len(self.tally.error_samples) < MAX_SAMPLES:
            self.tally.error_samples.append(message)
        raise _Abandoned

    def expect(self, run: PlannedRun, what: str, answer: Any, fields: dict[str, Any]) -> None:
        """Note (not abandon) an answer whose fields are not the ones expected."""
        got = {name: answer.get(name) for name in fields} if isinstance(answer, dict) else answer
        if got != fields:
            self.tally.wrong_answer_count += 1
            if len(self.tally.wrong_answers) < MAX_SAMPLES:
                self.tally.wrong_answers.append(f"{what} {run.run_id}: {got} != {fields}")


def _asks_to_try_again(response: httpx.Response) -> bool:
    """503, or a 409 for a race the service lost ("...; try again"), not for other content."""
    if response.status_code == 503:
        return True
    try:
        message = orjson.loads(response.content)["error"]["message"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return False
    return response.status_code == 409 and str(message).endswith("try again")


def _error_text(response: httpx.Response) -> str:
    try:
        error = orjson.loads(response.content)["error"]
        return f"{error['code']}: {error['message']}"
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return response.text[:200].replace("\n", " ")


def drive_load(
    base_url: str,
    token: str,
    runs: Sequence[PlannedRun],
    workload: Workload,
    deadline: float,
) -> tuple[_Tally, float, bool]:
    """Run the load: the merged tally, the wall time in seconds, and whether it timed out."""
    todo: queue.Queue[PlannedRun] = queue.Queue()
    for run in runs:
        todo.put(run)
    stop = threading.Event()
    clients = workload.clients
    ready = threading.Barrier(clients + 1)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    workers: list[_Client] = []

    def client_thread() -> None:
        with httpx.Client(base_url=base_url, headers=headers) as http:
            worker = _Client(http, deadline, stop, workload.retries)
            workers.append(worker)
            try:
                ready.wait()
            except threading.BrokenBarrierError:
                return
            worker.work(todo)

    threads = [
        threading.Thread(target=client_thread, name=f"load-client-{n}", daemon=True)
        for n in range(clients)
    ]
    for thread in threads:
        thread.start()
    try:
        ready.wait(timeout=max(0.0, deadline - time.perf_counter()))
    except threading.BrokenBarrierError:
        stop.set()
    started = time.perf_counter()
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.perf_counter()))
    timed_out = any(thread.is_alive() for thread in threads) or stop.is_set()
    stop.set()
    for thread in threads:
        thread.join(timeout=JOIN_GRACE_SECONDS)
    wall = time.perf_counter() - started
    total = _Tally()
    for worker in workers:
        total.merge(worker.tally)
    return total, wall, timed_out


def latency_summary(seconds: list[float]) -> dict[str, Any]:
    """Count, nearest-rank p50/p95/p99 and max, in milliseconds (None when nothing was timed)."""
    ordered = sorted(seconds)

    def rank(q: float) -> float | None:
        if not ordered:
            return None
        return round(ordered[max(0, math.ceil(q * len(ordered)) - 1)] * 1000, 3)

    return {
        "count": len(ordered),
        "p50": rank(0.50),
        "p95": rank(0.95),
        "p99": rank(0.99),
        "max": rank(1.0),
    }


def run_load_test(
    settings: Settings, workload: Workload, timeout: float, server_log: Path | None = None
) -> dict[str, Any]:
    """The whole load test over ``settings``' store; returns the report (see the module doc)."""
    began = time.perf_counter()
    deadline = began + timeout
    with Ledger.open(settings) as ledger:
        runs = plan_runs(workload, secrets.token_hex(4), ledger.snapshots.default_ids())
        with tempfile.TemporaryDirectory(prefix="mace-loadtest-") as scratch:
            tokens_file = Path(scratch) / "tokens.json"
            token = make_token(tokens_file)
            log_file = server_log or Path(scratch) / "serve.log"
            with ServiceProcess(settings, tokens_file, log_file) as service:
                service.start(deadline)
                setup = time.perf_counter() - began
                tally, wall, timed_out = drive_load(
                    service.base_url, token, runs, workload, deadline
                )
        verify_started = time.perf_counter()
        try:
            verification = verify_store(
                ledger,
                runs,
                tally.acknowledged,
                tally.attempts,
                TENANT,
                lambda: time.perf_counter() > deadline,
            )
        except VerificationTimeout as exc:
            verification = Verification(runs_planned=len(runs))
            verification.problem(f"the deadline passed while {exc}")
            timed_out = True
        verify_seconds = time.perf_counter() - verify_started
    return _report(
        settings, workload, timeout, tally, verification, timed_out, (setup, wall, verify_seconds)
    )


def _report(
    settings: Settings,
    workload: Workload,
    timeout: float,
    tally: _Tally,
    verification: Verification,
    timed_out: bool,
    phases: tuple[float, float, float],
) -> dict[str, Any]:
    setup, wall, verify_seconds = phases
    requests = tally.requests
    failed = bool(tally.errors) or tally.wrong_answer_count > 0 or timed_out
    ok = verification.ok and not failed
    return {
        "store": settings.parsed_store().describe(),
        "service": "mace serve (its own process) on 127.0.0.1",
        "tenant": TENANT,
        "workload": {
            "clients": workload.clients,
            "runs": workload.runs,
            "events_per_run": workload.events,
            "batches_per_run": workload.batches,
            "resent_batches_per_run": 1,
            "replays": workload.replays,
            "replay_mode": "audit",
            "retries": workload.retries,
            "timeout_seconds": timeout,
        },
        "requests": requests,
        "runs_completed": len(tally.acknowledged),
        "replays_completed": len(tally.attempts),
        "events_recorded": tally.events_recorded,
        "wall_seconds": round(wall, 3),
        "throughput": {
            "requests_per_second": round(requests / wall, 1) if wall > 0 else None,
            "events_per_second": round(tally.events_recorded / wall, 1) if wall > 0 else None,
        },
        "latency_ms": {kind: latency_summary(tally.latencies[kind]) for kind in KINDS},
        "errors": dict(sorted(tally.errors.items())),
        "retried": dict(sorted(tally.retried.items())),
        "error_samples": tally.error_samples,
        "wrong_answers": tally.wrong_answer_count,
        "wrong_answer_samples": tally.wrong_answers,
        "timed_out": timed_out,
        "phase_seconds": {
            "setup": round(setup, 3),
            "load": round(wall, 3),
            "verify": round(verify_seconds, 3),
        },
        "verification": verification.as_json(),
        "ok": ok,
    }
