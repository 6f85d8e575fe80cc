"""``mace loadtest``: drive the HTTP service with concurrent clients, then check the store.

A benchmark, not a test of the suite: its figures are printed (and belong in
docs/benchmarks.md), never asserted. The driver is `infrastructure.tooling.load_test`; this
module refuses what cannot run and prints the report. Its arguments are in
`infrastructure.tooling.command_arguments`; ``mace`` loads this module only when the command
runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from domain.canonical import canonical_json
from domain.errors import InvalidInput
from infrastructure.application.errors import EXIT_FAILED, EXIT_OK, Code, failure
from infrastructure.application.settings import PostgresStore, Settings
from infrastructure.tooling.load_server import LoadSetupError
from infrastructure.tooling.load_test import run_load_test
from infrastructure.tooling.load_workload import Workload


def load_test(args: argparse.Namespace, settings: Settings) -> int:
    store = settings.parsed_store()
    if not isinstance(store, PostgresStore) and not args.allow_sqlite:
        raise InvalidInput(
            f"MACE_STORE is {store.describe()}: mace loadtest measures a postgresql:// store"
            " (pass --allow-sqlite for a quick local try)"
        )
    replays = args.runs // 4 if args.replays is None else args.replays
    workload = Workload(args.clients, args.runs, args.events, args.batches, replays, args.retries)
    problems = workload.problems(settings.max_batch_events, settings.max_run_events)
    if not args.timeout > 0:
        problems.append(f"--timeout {args.timeout:g}: expected a positive number of seconds")
    if problems:
        raise InvalidInput(problems[0])
    try:
        report = run_load_test(settings, workload, args.timeout, args.server_log)
    except LoadSetupError as exc:
        refused = failure(Code.NOT_READY, str(exc))
        print(refused.line(args.json), file=sys.stderr)
        return refused.exit_code
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
        f" {v['replays_verified']}/{v['replays_answered']} answered replays ok, authoritative"
        " where no fact is taken as recorded"
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
