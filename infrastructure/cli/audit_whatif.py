"""``mace audit --with KEY=ID``: every selected recorded job re-run under a change, for CI.

Prints each job that changed or failed and the totals (``--json``: one canonical object per job,
then the batch's), records the batch once (`WhatIfBatchService`), and exits 0 when nothing
changed but what ``--expect`` lists and no job failed, 1 otherwise, 2 for bad input (nothing
read or written). The jobs are re-run as ``mace audit`` replays them: in ``--workers``
processes (`AuditWorkers`, each the jobs of its range of streams), read where reading commands
read (``MACE_READ_STORE`` when set); the record is written to ``MACE_STORE``.
"""

from __future__ import annotations

import argparse
import sys

from domain.governance import Actor
from domain.whatif import parse_with
from domain.whatif_batch import ExpectedChange, parse_expectations, parse_job_list
from infrastructure.application.audit_workers import AuditWorkers
from infrastructure.application.errors import EXIT_FAILED, EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.application.whatif_batch import BatchSelection
from infrastructure.cli.common import emit_json, progress_bar, read_bytes
from infrastructure.cli.read_store import print_read_store, read_store_note
from projections.whatif_batch import render_batch_text


def whatif_batch(args: argparse.Namespace, settings: Settings, actor: Actor) -> int:
    changes = parse_with(args.changes)
    jobs = None if args.jobs is None else parse_job_list(*read_bytes(args.jobs))
    expected: frozenset[ExpectedChange] = (
        frozenset() if args.expect is None else parse_expectations(*read_bytes(args.expect))
    )
    selection = BatchSelection(args.tenant, args.since, args.until, jobs)
    show_progress = sys.stderr.isatty() and not args.json
    progress = progress_bar("re-running", "jobs") if show_progress else None
    # The workers start before any store is open here (`audit_workers` says why).
    with (
        AuditWorkers(settings, args.workers) as workers,
        Ledger.open_for_reading(settings) as reading,
    ):
        note = read_store_note(reading)
        report = reading.whatif_batches.report(
            selection, changes, actor, expected, progress, workers
        )
    if show_progress:
        print(file=sys.stderr)
    with Ledger.open(settings, create=False) as primary:
        result = primary.whatif_batches.record(report, actor)
    if args.json:
        for row in report["jobs"]:
            emit_json(row)
        emit_json(
            {
                "record_id": result.record_id,
                **{k: v for k, v in report.items() if k != "jobs"},
                **note,
            }
        )
    else:
        print_read_store(note)
        print("\n".join(render_batch_text(report)))
        print(f"recorded: what-if batch record {result.record_id} (never authoritative)")
    return EXIT_OK if result.passed else EXIT_FAILED
