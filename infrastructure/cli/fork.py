"""``mace fork JOB --at ITERATION [--input TEXT] [--with KEY=ID ...]``: a recorded job forked
from a step, recorded as a new job, printed as a diff against the original.

Exit 0: the fork is recorded (whether or not a decision changed: a fork records, it gates
nothing; ``mace replay --with`` is the gate); 1: the original does not verify or reproduce; 2:
bad usage, a fork already recorded (CONFLICT) or a job a fork cannot decide again
(FORK_NOT_REDECIDABLE), nothing written."""

from __future__ import annotations

import argparse

from domain.whatif import parse_with
from infrastructure.application.errors import EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.cli.common import acting_actor, emit_json
from projections.fork import render_text


def fork_job(args: argparse.Namespace, settings: Settings) -> int:
    actor = acting_actor(settings)
    changes = parse_with(args.changes) if args.changes else None
    with Ledger.open(settings, create=False) as ledger:
        result = ledger.forks.fork(
            args.job_id, args.at, actor, changes=changes, text=args.text, tenant=args.tenant
        )
    if args.json:
        emit_json(result.answer())
    else:
        print("\n".join(render_text(result.report)))
        print(f"recorded: fork record {result.record_id} (never authoritative)")
    return EXIT_OK
