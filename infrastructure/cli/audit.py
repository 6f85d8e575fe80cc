"""``mace audit``: replay every job from one read of the log, print per job, record one result.

The log is read where `Ledger.open_for_reading` reads (``MACE_READ_STORE`` when set, named in
the output as ``mace verify`` names it); the signed audit record is written to ``MACE_STORE``.
Exit 0 when no job diverged and nothing failed verification, 1 otherwise. With ``--with KEY=ID``
it is a what-if over the selected jobs instead (`audit_whatif`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from domain.audit_record import AuditRecord
from domain.errors import InvalidInput
from infrastructure.application.audit import audit_answer, check_auditor
from infrastructure.application.audit_workers import AuditWorkers
from infrastructure.application.errors import EXIT_FAILED, EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.cli.audit_whatif import whatif_batch
from infrastructure.cli.common import acting_actor, emit_json, progress_bar
from infrastructure.cli.read_store import print_read_store, read_store_note
from projections.audit import AuditReport, AuditScope, Verdict
from projections.replay_report import fact_counts


def audit_command(args: argparse.Namespace, settings: Settings) -> int:
    actor = acting_actor(settings)
    check_auditor(actor)
    if args.changes:
        return whatif_batch(args, settings, actor)
    given = [
        option
        for option, value in (
            ("--until", args.until),
            ("--jobs", args.jobs),
            ("--expect", args.expect),
        )
        if value is not None
    ]
    if given:
        raise InvalidInput(f"{given[0]} selects jobs for a what-if: it goes with --with KEY=ID")
    scope = AuditScope(args.tenant, args.since)
    show_progress = sys.stderr.isatty() and not args.json
    # The workers start before any store is open here (`audit_workers` says why).
    progress = progress_bar("auditing", "events") if show_progress else None
    with (
        AuditWorkers(settings, args.workers) as workers,
        Ledger.open_for_reading(settings) as reading,
    ):
        note = read_store_note(reading)
        report = reading.audits.audit(scope, workers, progress)
    if show_progress:
        print(file=sys.stderr)
    with Ledger.open(settings, create=False) as primary:
        record = primary.audits.record(report, actor)
    if args.json:
        emit_json({**audit_answer(report, record, args.workers), **note})
    else:
        _print_report(report, record, args.workers, note)
    return EXIT_OK if report.ok else EXIT_FAILED


def _print_report(
    report: AuditReport, record: AuditRecord, workers: int, note: dict[str, Any]
) -> None:
    print_read_store(note)
    summary = report.summary()
    tenant = "every tenant" if report.scope.tenant is None else f"tenant {report.scope.tenant}"
    print(
        f"audit of notifications {report.scope.since + 1} to {report.through} ({tenant},"
        f" {workers} worker{'s' if workers > 1 else ''})"
    )
    for job in report.findings.jobs:
        text = _verdict_text(job.verdict, job.code, job.detail, job.divergence)
        counts = "" if job.check_counts is None else f"; {fact_counts(job.check_counts)}"
        print(f"job {job.job}: {text}{counts}")
    for failure in report.findings.stream_failures:
        print(
            f"stream {failure.stream}: INTEGRITY_FAILURE at version {failure.version}:"
            f" {failure.reason}"
        )
    totals = summary["totals"]
    reasons = ", ".join(f"{why} {n}" for why, n in summary["not_replayable"].items())
    print(
        f"totals: {totals['jobs']} jobs: {totals['ok']} ok, {totals['diverged']} diverged,"
        f" {totals['integrity_failures']} integrity failures, {totals['not_replayable']} not"
        f" replayable{f' ({reasons})' if reasons else ''}, {totals['open']} open (skipped);"
        f" {totals['events']} events in {totals['streams']} streams,"
        f" {totals['stream_failures']} other streams failing verification"
    )
    print(f"facts of the {report.replayed} jobs replayed: {fact_counts(report.fact_totals())}")
    for line in report.checked:
        print(f"checked: {line}")
    for line in report.not_checked:
        print(f"not checked: {line}")
    print(
        f"audit record {record.audit_id} written to MACE_STORE;"
        f" results digest {summary['results_digest']}"
    )


def _verdict_text(
    verdict: Verdict, code: str | None, detail: str, divergence: dict[str, Any] | None
) -> str:
    if verdict is Verdict.OK:
        return "ok"
    if verdict is Verdict.OPEN:
        return "open (skipped: not sealed)"
    if verdict is Verdict.DIVERGED and divergence is not None:
        where = "job" if divergence["iteration"] is None else f"iteration {divergence['iteration']}"
        return f"DIVERGED {code}: {where}, field {divergence['field']}"
    label = "not replayable" if verdict is Verdict.NOT_REPLAYABLE else str(code)
    return f"{label}: {detail}" if code is None or label == code else f"{label} ({code}): {detail}"
