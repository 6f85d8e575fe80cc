"""``mace run``, ``mace events`` and ``mace jobs``: record a Stage-0 job and read jobs back."""

from __future__ import annotations

import argparse
import sys

from domain.canonical import CanonicalJSONError, canonical_json
from domain.events import ALL_TYPES
from domain.job import CaptureMode
from infrastructure.application.ledger import Ledger
from infrastructure.application.personal_data import CLI_CHANNEL
from infrastructure.cli.common import (
    EXIT_OK,
    UsageError,
    acting_actor,
    emit_json,
    snapshot_overrides,
)
from infrastructure.storage.settings import Settings
from projections.job_summaries import job_listing, run_report
from projections.read_model_rows import JOB_INDEX

STREAM_TYPES = ("JobStarted", *sorted(ALL_TYPES), "JobSealed")


def run_job(args: argparse.Namespace, settings: Settings) -> int:
    if not args.seed:
        raise UsageError("--seed must not be empty")
    overrides = snapshot_overrides(args.snapshot)
    try:
        canonical_json([args.text, args.seed, args.user])
    except CanonicalJSONError as exc:
        raise UsageError(f"input cannot be recorded: {exc}") from None
    with Ledger.open(settings) as ledger:
        try:
            log = ledger.jobs.run(
                args.text,
                args.seed,
                job_id=args.job_id,
                user=args.user,
                capture_mode=CaptureMode(args.capture),
                snapshot_ids=overrides,
                tenant=args.tenant,
            )
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    report = run_report(log)
    if args.json:
        emit_json(report)
        return EXIT_OK
    decision = report["router_decision"]
    print(f"job {log.job_id}")
    print(f"  answer: {report['final_output']}")
    print(f"  route: {decision['rule_id']} -> {decision['agent']} ({decision['why']})")
    print(f"  agents: {', '.join(report['selected_agents'])}")
    print(f"  replayable: {'yes' if report['replayable'] else 'no'}")
    for missing in report["missing_artifacts"]:
        print(f"    missing {', '.join(missing['missing'])} of {missing['step']}")
    return EXIT_OK


def job_events(args: argparse.Namespace, settings: Settings) -> int:
    if args.event_type is not None and args.event_type not in STREAM_TYPES:
        raise UsageError(f"unknown event type {args.event_type!r}: expected one of {STREAM_TYPES}")
    reader = acting_actor(settings) if settings.actor or settings.roles else None
    with Ledger.open(settings, create=False) as ledger:
        try:
            read = ledger.personal_data.read_job(
                args.job_id,
                args.tenant,
                reader,
                CLI_CHANNEL,
                lambda e: args.event_type is None or e["event_type"] == args.event_type,
            )
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if read.personal_versions:
        versions = ", ".join(str(v) for v in read.personal_versions)
        if read.in_full:
            note = f"your read of personal data (versions {versions}) was recorded"
        else:
            note = f"personal data in versions {versions} redacted: only admin reads it in full"
        print(f"mace: note: {note}", file=sys.stderr)
    for entry in read.shown_events():
        if args.json:
            emit_json(entry)
            continue
        index = "-" if entry["sequence_index"] is None else entry["sequence_index"]
        payload = canonical_json(entry["payload"]).decode()
        print(f"{entry['version']:>4} #{index} {entry['event_type']} {payload}")
    return EXIT_OK


def list_jobs(args: argparse.Namespace, settings: Settings) -> int:
    with Ledger.open(settings, create=False) as ledger:
        summaries = job_listing(ledger.read_models.rows(JOB_INDEX), args.tenant)
    if args.non_replayable:
        summaries = [s for s in summaries if s["replayable"] is not True]
    for summary in summaries:
        if args.json:
            emit_json(summary)
            continue
        replayable = {True: "replayable", False: "NOT replayable", None: "open"}
        status = f"{summary['status']}  {replayable[summary['replayable']]}"
        print(f"{summary['job_id']}  {status}  tenant {summary['tenant']}")
        for missing in summary["missing_artifacts"]:
            reason = missing["reason"]
            print(f"    missing {', '.join(missing['missing'])} of {missing['step']}: {reason}")
    return EXIT_OK
