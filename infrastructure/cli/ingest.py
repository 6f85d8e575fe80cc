"""``mace ingest`` (record a run produced elsewhere) and ``mace schema`` (its JSON Schema)."""

from __future__ import annotations

import argparse

from domain.canonical import canonical_json
from domain.errors import InvalidInput
from domain.events import json_schema
from domain.run_draft import RunTooLarge, check_run_size
from domain.run_file import RunFileError, parse_run
from infrastructure.application.errors import EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.privacy_rules import ClearPrivateValue
from infrastructure.application.runs import RefusedSemClaim
from infrastructure.application.settings import Settings
from infrastructure.cli.common import emit_json, read_bytes
from projections.job_summaries import recorded_run


def ingest_run(args: argparse.Namespace, settings: Settings) -> int:
    name, raw = read_bytes(args.file)
    try:
        run = parse_run(raw.split(b"\n"))
    except RunFileError as exc:
        raise InvalidInput(f"{name} {exc}") from None
    try:
        check_run_size(f"run in {name}", len(run.events), settings.max_run_events)
    except RunTooLarge as exc:
        raise InvalidInput(f"{exc} (MACE_MAX_RUN_EVENTS)") from None
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
