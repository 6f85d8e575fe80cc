"""``mace ingest`` (record a run produced elsewhere) and ``mace schema`` (its JSON Schema)."""

from __future__ import annotations

import argparse

from domain.canonical import canonical_json
from domain.errors import InvalidInput
from domain.events import json_schema
from domain.run_file import RunFileError, parse_run
from infrastructure.application.errors import EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.limits import InputLimits
from infrastructure.application.privacy_rules import ClearPrivateValue
from infrastructure.application.runs import RefusedSemClaim
from infrastructure.application.settings import Settings
from infrastructure.cli.common import emit_json, read_stream
from projections.job_summaries import recorded_run


def ingest_run(args: argparse.Namespace, settings: Settings) -> int:
    limits = InputLimits.of(settings)
    # Refused by size as it is read: a file past the limit is never held whole, nor decoded.
    name, raw = read_stream(args.file, limits.read_run_file)
    try:
        run = parse_run(raw.split(b"\n"))
    except RunFileError as exc:
        raise InvalidInput(f"{name} {exc}") from None
    # Before the ledger is opened; recording the run checks the same limits again.
    limits.check_events(f"run in {name}", [event.model_dump(mode="json") for event in run.events])
    limits.check_final_output(f"run in {name}", run.completed.final_output)
    with Ledger.open(settings) as ledger:
        try:
            log, duplicate = ledger.run_imports.record_once(run, args.tenant)
        except (ClearPrivateValue, RefusedSemClaim) as exc:
            where = "" if exc.position < 0 else f" event {exc.position + 1}"
            raise InvalidInput(f"{name}{where}: {exc}") from None
    summary = {**recorded_run(log, len(run.events)), "duplicate": duplicate}
    if args.json:
        emit_json(summary)
        return EXIT_OK
    if duplicate:
        print(f"job {log.job_id}: this run was recorded before (same content); nothing written")
    else:
        print(f"job {log.job_id}: {len(run.events)} events recorded and sealed")
    print(f"  replayable: {'yes' if summary['replayable'] else 'no'}")
    for item in summary["missing_artifacts"]:
        print(f"    missing {', '.join(item['missing'])} of {item['step']}: {item['reason']}")
    return EXIT_OK


def print_schema(args: argparse.Namespace, settings: Settings) -> int:
    print(canonical_json(json_schema()).decode())
    return EXIT_OK
