"""``mace run``, ``mace events`` and ``mace jobs``: record a Stage-0 job and read jobs back."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from domain.canonical import CanonicalJSONError, canonical_json
from domain.capture import CAPTURE_WHY_TEXT, CaptureWhy
from domain.errors import InvalidInput, NotFoundError
from domain.events import ALL_TYPES
from domain.evidence_uri import SCHEME, EvidenceUri, parse_evidence_uri
from domain.job import DEFAULT_TENANT, CaptureMode
from infrastructure.application.errors import EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.personal_data import CLI_CHANNEL
from infrastructure.application.settings import Settings
from infrastructure.cli.common import emit_json, reading_actor, snapshot_overrides
from projections.job_search import FILTERS, JobQuery, parse_job_query
from projections.job_summaries import run_report

STREAM_TYPES = ("JobStarted", *sorted(ALL_TYPES), "JobSealed")


def run_job(args: argparse.Namespace, settings: Settings) -> int:
    if not args.seed:
        raise InvalidInput("--seed must not be empty")
    overrides = snapshot_overrides(args.snapshot)
    try:
        canonical_json([args.text, args.seed, args.user])
    except CanonicalJSONError as exc:
        raise InvalidInput(f"input cannot be recorded: {exc}") from None
    with Ledger.open(settings) as ledger:
        log = ledger.jobs.run(
            args.text,
            args.seed,
            job_id=args.job_id,
            user=args.user,
            capture_mode=None if args.capture is None else CaptureMode(args.capture),
            snapshot_ids=overrides,
            tenant=args.tenant,
        )
    report = run_report(log)
    if args.json:
        emit_json(report)
        return EXIT_OK
    decision = report["router_decision"]
    print(f"job {log.job_id}")
    print(f"  answer: {report['final_output']}")
    print(f"  route: {decision['rule_id']} -> {decision['agent']} ({decision['why']})")
    print(f"  agents: {', '.join(report['selected_agents'])}")
    why = CAPTURE_WHY_TEXT[CaptureWhy(report["capture_why"])]
    print(f"  capture: {report['capture_mode']} ({why})")
    print(f"  replayable: {'yes' if report['replayable'] else 'no'}")
    for missing in report["missing_artifacts"]:
        print(f"    missing {', '.join(missing['missing'])} of {missing['step']}")
    return EXIT_OK


def job_events(args: argparse.Namespace, settings: Settings) -> int:
    if args.event_type is not None and args.event_type not in STREAM_TYPES:
        raise InvalidInput(
            f"unknown event type {args.event_type!r}: expected one of {STREAM_TYPES}"
        )
    named = _evidence_named(args)
    if named is not None and named.kind == "report":
        return _stored_report(named, args, settings)
    job_id, tenant, chosen = _events_chosen(args, named)
    reader = reading_actor(settings)
    with Ledger.open(settings, create=False) as ledger:
        read = ledger.personal_data.read_job(job_id, tenant, reader, CLI_CHANNEL, chosen)
    if args.job_id.startswith(SCHEME) and not read.events:
        raise NotFoundError(f"no event at {args.job_id}: job {job_id} records no such fact")
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
        address = "" if entry["uri"] is None else f"  {entry['uri']}"
        print(f"{entry['version']:>4} #{index} {entry['event_type']} {payload}{address}")
    return EXIT_OK


def _evidence_named(args: argparse.Namespace) -> EvidenceUri | None:
    """The evidence URI given in place of a job id (its tenant is the URI's; another
    ``--tenant`` is refused), or None for a plain job id."""
    if not args.job_id.startswith(SCHEME):
        return None
    uri = parse_evidence_uri(args.job_id)
    if args.tenant not in (DEFAULT_TENANT, uri.tenant):
        raise InvalidInput(f"{args.job_id} is tenant {uri.tenant}'s, not {args.tenant}'s")
    return uri


def _stored_report(uri: EvidenceUri, args: argparse.Namespace, settings: Settings) -> int:
    """The replay report a report URI names, as stored: JSON with --json, else its Markdown."""
    if args.event_type is not None:
        raise InvalidInput(f"{args.job_id} names a replay report: --type applies to events")
    with Ledger.open(settings, create=False) as ledger:
        try:
            record = ledger.replays.record(uri.job_id, uri.number, tenant=uri.tenant)
        except NotFoundError:
            raise NotFoundError(f"no replay report at {args.job_id}") from None
    if record.report is None:
        raise NotFoundError(f"no replay report at {args.job_id}: the attempt has no result yet")
    if args.json:
        emit_json(record.report)
    else:
        print(record.markdown or "", end="")
    return EXIT_OK


def _events_chosen(
    args: argparse.Namespace, uri: EvidenceUri | None
) -> tuple[str, str, Callable[[dict[str, Any]], bool]]:
    """The job, tenant and events ``mace events`` prints: a job's (of ``--type``), or the one
    fact an evidence URI names."""
    of_type = args.event_type
    if uri is None:
        return args.job_id, args.tenant, lambda e: of_type is None or e["event_type"] == of_type
    return (
        uri.job_id,
        uri.tenant,
        lambda e: (
            e["sequence_index"] == uri.number and (of_type is None or e["event_type"] == of_type)
        ),
    )


REPLAYABLE = {True: "yes", False: "no", None: "open"}
LISTING_HEADER = ("JOB ID", "STATUS", "REPLAYABLE", "TENANT")


def list_jobs(args: argparse.Namespace, settings: Settings) -> int:
    """A page of the job listing, as ``GET /v1/jobs`` answers it: ``--json`` its body."""
    query = _listing_query(args)
    with Ledger.open(settings, create=False) as ledger:
        page = ledger.read_models.jobs(
            query, non_replayable=args.non_replayable, limit=args.limit, offset=args.offset
        )
    if args.json:
        emit_json(page)
        return EXIT_OK
    jobs, total, offset = page["jobs"], page["total"], args.offset
    if not jobs:
        print("no jobs" if not total else f"no jobs after the first {offset} of {total}")
        return EXIT_OK
    rows = [
        (job["job_id"], job["status"], REPLAYABLE[job["replayable"]], job["tenant"]) for job in jobs
    ]
    # Columns as wide as their widest cell; the last one, unpadded.
    widths = [max(map(len, column)) for column in zip(LISTING_HEADER, *rows, strict=True)][:-1]

    def line(row: tuple[str, ...]) -> str:
        return "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]])

    print(line(LISTING_HEADER))
    for row, job in zip(rows, jobs, strict=True):
        print(line(row))
        for missing in job["missing_artifacts"]:
            reason = missing["reason"]
            print(f"    missing {', '.join(missing['missing'])} of {missing['step']}: {reason}")
    if len(jobs) < total:
        last = offset + len(jobs)
        more = f"; the next page: --offset {last}" if last < total else ""
        print(f"jobs {offset + 1}-{last} of {total}{more}")
    return EXIT_OK


def _listing_query(args: argparse.Namespace) -> JobQuery:
    """The filters given as flags, checked as ``GET /v1/jobs`` and the dashboard check them;
    a bad one is refused naming its flag (each flag is its query parameter's name)."""
    flags = (
        args.job,
        args.status,
        args.replayable,
        args.error,
        args.replayed_from,
        args.replayed_to,
    )
    given = {name: value for name, value in zip(FILTERS, flags, strict=True) if value is not None}
    try:
        return parse_job_query(args.tenant, given)
    except InvalidInput as bad:
        raise InvalidInput(f"--{bad}") from None
