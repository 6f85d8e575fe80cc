"""``mace ingest`` (record a run produced elsewhere) and ``mace schema`` (its JSON Schema)."""

from __future__ import annotations

import argparse
from typing import Any

from domain.canonical import canonical_json
from domain.errors import InvalidInput
from domain.events import json_schema
from domain.run_file import RunFileError, parse_run
from infrastructure.application.errors import EXIT_FAILED, EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.limits import InputLimits
from infrastructure.application.otlp_decoding import spans_of_json
from infrastructure.application.privacy_rules import ClearPrivateValue
from infrastructure.application.runs import RefusedSemClaim
from infrastructure.application.settings import Settings
from infrastructure.application.trace_imports import TraceOutcome
from infrastructure.cli.common import emit_json, read_stream
from projections.job_summaries import recorded_run


def ingest_run(args: argparse.Namespace, settings: Settings) -> int:
    limits = InputLimits.of(settings)
    # Refused by size as it is read: a file past the limit is never held whole, nor decoded.
    name, raw = read_stream(args.file, limits.read_run_file)
    if args.otlp:
        return _ingest_traces(args, settings, name, raw)
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
    _print_recorded("", summary)
    return EXIT_OK


def _ingest_traces(args: argparse.Namespace, settings: Settings, name: str, raw: bytes) -> int:
    """``mace ingest --otlp``: each whole trace of an OTLP/JSON export recorded as one run; exit 1
    when a trace was not whole (it is named, and not recorded)."""
    spans = spans_of_json(raw)
    with Ledger.open(settings) as ledger:
        try:
            outcomes = ledger.trace_imports.record_whole_traces(spans, args.tenant)
        except (ClearPrivateValue, RefusedSemClaim) as exc:
            raise InvalidInput(f"{name}: {exc}") from None
    if not outcomes:
        raise InvalidInput(f"{name}: no spans; expected an OTLP trace export with resourceSpans")
    answers = [_trace_answer(outcome) for outcome in outcomes]
    if args.json:
        emit_json({"traces": answers})
    for answer in [] if args.json else answers:
        if answer["recorded"]:
            _print_recorded(f"trace {answer['trace_id']}: ", answer)
        else:
            print(
                f"trace {answer['trace_id']}: not recorded, {answer['incomplete']}:"
                " a partial trace is never recorded as a complete run; send the whole trace"
            )
    return EXIT_FAILED if any(not answer["recorded"] for answer in answers) else EXIT_OK


def _trace_answer(outcome: TraceOutcome) -> dict[str, Any]:
    if outcome.log is None:
        return {"trace_id": outcome.trace_id, "recorded": False, "incomplete": outcome.incomplete}
    return {
        "trace_id": outcome.trace_id,
        "recorded": True,
        **recorded_run(outcome.log, outcome.events),
        "duplicate": outcome.duplicate,
    }


def _print_recorded(prefix: str, summary: dict[str, Any]) -> None:
    if summary["duplicate"]:
        said = "this run was recorded before (same content); nothing written"
    else:
        said = f"{summary['events']} events recorded and sealed"
    print(f"{prefix}job {summary['job_id']}: {said}")
    print(f"  replayable: {'yes' if summary['replayable'] else 'no'}")
    for item in summary["missing_artifacts"]:
        print(f"    missing {', '.join(item['missing'])} of {item['step']}: {item['reason']}")


def print_schema(args: argparse.Namespace, settings: Settings) -> int:
    print(canonical_json(json_schema()).decode())
    return EXIT_OK
