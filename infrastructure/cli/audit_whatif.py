"""``mace audit --with KEY=ID``: every selected recorded job re-run under a change, for CI.

Prints each job that changed or failed and the totals (``--json``: one canonical object per job,
then the batch's), records the batch once (`WhatIfBatchService`), and exits 0 when nothing
changed but what ``--expect`` lists and no job failed, 1 otherwise, 2 for bad input (nothing
read or written). The jobs are re-run one after another in this process: ``--workers`` is not
taken.
"""

from __future__ import annotations

import argparse
import sys

from domain.errors import InvalidInput
from domain.governance import Actor
from domain.whatif import parse_with
from domain.whatif_batch import ExpectedChange, parse_expectations, parse_job_list
from infrastructure.application.errors import EXIT_FAILED, EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.application.whatif_batch import BatchSelection
from infrastructure.cli.common import emit_json, progress_bar, read_bytes
from projections.whatif_batch import render_batch_text


def whatif_batch(args: argparse.Namespace, settings: Settings, actor: Actor) -> int:
    if args.workers != 1:
        raise InvalidInput("--with re-runs the jobs in this process: it takes no --workers")
    changes = parse_with(args.changes)
    jobs = None if args.jobs is None else parse_job_list(*read_bytes(args.jobs))
    expected: frozenset[ExpectedChange] = (
        frozenset() if args.expect is None else parse_expectations(*read_bytes(args.expect))
    )
    selection = BatchSelection(args.tenant, args.since, args.until, jobs)
    show_progress = sys.stderr.isatty() and not args.json
    progress = progress_bar("re-running", "jobs") if show_progress else None
    with Ledger.open(settings, create=False) as ledger:
        result = ledger.whatif_batches.run(selection, changes, actor, expected, progress)
    if show_progress:
        print(file=sys.stderr)
    report = result.report
    if args.json:
        for row in report["jobs"]:
            emit_json(row)
        emit_json(
            {"record_id": result.record_id, **{k: v for k, v in report.items() if k != "jobs"}}
        )
    else:
        print("\n".join(render_batch_text(report)))
        print(f"recorded: what-if batch record {result.record_id} (never authoritative)")
    return EXIT_OK if result.passed else EXIT_FAILED
