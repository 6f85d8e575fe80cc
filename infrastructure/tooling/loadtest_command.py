"""``mace loadtest``: drive the HTTP service with concurrent clients, then check the store.

A benchmark, not a test of the suite: its figures are printed (and belong in the README), never
asserted. The driver is `infrastructure.tooling.load_test`; this module parses, refuses what
cannot run, and prints the report. ``mace`` names it in its command table and loads it on use.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from domain.canonical import canonical_json
from infrastructure.storage.errors import EXIT_FAILED, EXIT_OK, UsageError
from infrastructure.storage.settings import PostgresStore, Settings
from infrastructure.tooling.load_server import LoadSetupError
from infrastructure.tooling.load_test import run_load_test
from infrastructure.tooling.load_workload import Workload

DESCRIPTION = """\
Start the real service (`mace serve` in its own process, so that the clients do not share its
interpreter lock, on a free 127.0.0.1 port) over the postgresql:// store MACE_STORE names (any
other store is refused unless --allow-sqlite), with a throwaway tokens file (one
operator+admin+auditor token for tenant "loadtest"), and drive it with --clients threads, each
with its own keep-alive HTTP connection.

Each of --runs runs is an outside run: POST /v1/runs, --events events in --batches batches,
one batch sent again (it must come back as all duplicates: idempotency under load), POST
/v1/runs/{id}/complete. Its first events are the Stage-0 iteration for its input (an arithmetic
question) under the declared Stage-0 default snapshots, the rest tool calls and results, so an
audit replay of it reproduces it authoritatively. --replays of the runs (spread evenly; default
every 4th) get POST /replay/request (audit) right after they are recorded, from the same client.

Reported: requests, wall time, requests/s and recorded events/s, p50/p95/p99/max latency per
endpoint kind (open, batch, complete, replay), failures by status. Then the store is read back
through the ledger, not the HTTP answers: every acknowledged run must be a sealed job holding
exactly the events sent (count and content digests, in order; the re-sent batch stored once),
and every answered replay recorded in its job's governance as ok and authoritative.

A request that fails is counted by status and its run abandoned; with --retries N, an answer
that asks to try again (503, or a 409 whose message ends "try again": a race the service lost)
is first re-sent at once, up to N times, each re-send counted as retried. An abandoned run must
be absent from the store or recorded exactly, never in part. --timeout bounds the whole command
(start-up, load and read-back). Exit 0 only when no request failed, every answer was as expected
and the read-back holds; 1 otherwise; 2 on bad usage (nothing started). Each invocation writes
new jobs (ids load-<random>-<n>) to the store: point MACE_STORE at a database meant for it.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (8)")
    parser.add_argument("--runs", type=int, default=200, help="runs in total (200)")
    parser.add_argument("--events", type=int, default=20, help="events per run (20; at least 4)")
    parser.add_argument("--batches", type=int, default=2, help="event batches per run (2)")
    parser.add_argument(
        "--replays", type=int, default=None, help="runs to replay (default: every 4th run)"
    )
    parser.add_argument(
        "--retries", type=int, default=0, help="re-sends of a 'try again' answer (0)"
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="hard limit in seconds, all phases (600)"
    )
    parser.add_argument(
        "--allow-sqlite", action="store_true", help="also run on a SQLite store (a quick try)"
    )
    parser.add_argument("--server-log", type=Path, help="keep the service's output in this file")
    parser.add_argument("--json", action="store_true", help="print the report as canonical JSON")
    parser.set_defaults(handler=load_test)


def load_test(args: argparse.Namespace, settings: Settings) -> int:
    store = settings.parsed_store()
    if not isinstance(store, PostgresStore) and not args.allow_sqlite:
        raise UsageError(
            f"MACE_STORE is {store.describe()}: mace loadtest measures a postgresql:// store"
            " (pass --allow-sqlite for a quick local try)"
        )
    replays = args.runs // 4 if args.replays is None else args.replays
    workload = Workload(args.clients, args.runs, args.events, args.batches, replays, args.retries)
    problems = workload.problems(settings.max_batch_events, settings.max_run_events)
    if not args.timeout > 0:
        problems.append(f"--timeout {args.timeout:g}: expected a positive number of seconds")
    if problems:
        raise UsageError(problems[0])
    try:
        report = run_load_test(settings, workload, args.timeout, args.server_log)
    except LoadSetupError as exc:
        print(f"mace: error: {exc}".splitlines()[0], file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        sys.stdout.buffer.write(canonical_json(report) + b"\n")
    else:
        print(render(report))
    return EXIT_OK if report["ok"] else EXIT_FAILED


def render(report: dict[str, Any]) -> str:
    """The report for a person: the workload, the figures, the failures, the read-back."""
    w, t, v = report["workload"], report["throughput"], report["verification"]
    lines = [
        f"mace loadtest: {w['clients']} clients, {w['runs']} runs x {w['events_per_run']} events"
        f" ({w['batches_per_run']} batches + 1 re-sent), {w['replays']} audit replays",
        f"store {report['store']}; {report['service']}",
        f"{report['requests']} requests in {report['wall_seconds']:.3f} s:"
        f" {t['requests_per_second']} requests/s, {t['events_per_second']} recorded events/s",
        f"{'latency ms':<12}{'count':>7}{'p50':>10}{'p95':>10}{'p99':>10}{'max':>10}",
    ]
    for kind, row in report["latency_ms"].items():
        cells = "".join(f"{_ms(row[q]):>10}" for q in ("p50", "p95", "p99", "max"))
        lines.append(f"  {kind:<10}{row['count']:>7}{cells}")
    errors = ", ".join(f"{status}: {n}" for status, n in report["errors"].items())
    lines.append(f"failed requests: {errors or 'none'}")
    if report["retried"]:
        retried = ", ".join(f"{status}: {n}" for status, n in report["retried"].items())
        lines.append(f"re-sent after 'try again': {retried}")
    lines.extend(f"  {sample}" for sample in report["error_samples"])
    if report["wrong_answers"]:
        lines.append(f"wrong answers: {report['wrong_answers']}")
        lines.extend(f"  {sample}" for sample in report["wrong_answer_samples"])
    if report["timed_out"]:
        lines.append(f"TIMED OUT after --timeout {w['timeout_seconds']:g} s")
    lines.append(
        f"read back: {v['runs_verified']}/{v['runs_acknowledged']} acknowledged runs sealed with"
        f" exactly the events sent ({v['events_found']}/{v['events_sent']} events),"
        f" {v['replays_verified']}/{v['replays_answered']} answered replays ok and authoritative"
    )
    abandoned = v["runs_planned"] - v["runs_acknowledged"]
    if abandoned:
        lines.append(
            f"  {abandoned} abandoned runs: {v['abandoned_runs_absent']} absent,"
            f" {v['abandoned_runs_recorded_exactly']} recorded exactly"
        )
    lines.extend(f"  {problem}" for problem in v["problems"])
    lines.append("OK" if report["ok"] else "FAILED")
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
