"""``mace replay JOB_ID``: replay a job, record the attempt, print and write its report; with
``--with KEY=ID``, a what-if of the job under other snapshots or another policy bundle; with
``--as-of POINT [--compare-to POINT]``, its memory served as of a point (`replay_as_of`)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from domain.canonical import canonical_json
from domain.errors import InvalidInput
from domain.governance import Actor
from domain.job import DEFAULT_TENANT
from domain.replay_access import ReplayMode
from domain.stage0.agents import AGENTS, AgentReply
from domain.whatif import parse_with
from infrastructure.application.errors import EXIT_FAILED, EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.replays import ReplayResult
from infrastructure.application.settings import Settings
from infrastructure.bundles.format import Bundle
from infrastructure.cli import counterfactuals
from infrastructure.cli.bundles import open_bundle, replay_from_bundle
from infrastructure.cli.common import acting_actor, emit_json, read_json_object
from infrastructure.cli.replay_as_of import as_of_job
from projections.replay import NOT_REPRODUCED, NOT_REPRODUCED_WHY
from projections.replay_checks import LABELS, Check
from projections.replay_report import verdict
from projections.whatif import render_text

REPORT_JSON = "replay_report.json"
REPORT_MD = "replay_report.md"


def replay_job(args: argparse.Namespace, settings: Settings) -> int:
    actor = acting_actor(settings)
    if args.as_of is not None or args.compare_to is not None:
        counterfactuals.of_stored_job(args, "--as-of")
        return as_of_job(args, settings, actor)
    if args.changes:
        return _whatif(args, settings, actor)
    mode = ReplayMode(args.mode)
    mocks = {name: reply for name, reply in map(_mock, args.mock)}
    if mocks and mode is not ReplayMode.REEXECUTE:
        raise InvalidInput("--mock is for --mode reexecute only")
    if len(mocks) != len(args.mock):
        raise InvalidInput("--mock names the same agent twice")
    bundle = _bundle(args, settings)
    if args.report_dir is not None:
        _prepare(args.report_dir)
    if bundle is not None:
        result = replay_from_bundle(bundle, mode, actor, args.force_continue, mocks)
    else:
        with Ledger.open(settings, create=False) as ledger:
            result = ledger.replays.run(
                args.job_id,
                mode,
                actor,
                tenant=args.tenant or DEFAULT_TENANT,
                force_continue=args.force_continue,
                mocks=mocks,
            )
    if args.report_dir is not None:
        (args.report_dir / REPORT_JSON).write_bytes(canonical_json(result.report) + b"\n")
        (args.report_dir / REPORT_MD).write_text(result.markdown, encoding="utf-8")
    if args.json:
        emit_json(result.report)
    else:
        print_report(result, args.report_dir)
        if bundle is not None:
            print(f"bundle {args.bundle}: {bundle.inclusion.summary()}")
            print(f"replayed from bundle {args.bundle}: nothing was recorded (no store)")
    if result.outcome.ok:
        return EXIT_OK
    report = result.report
    # NOT REPRODUCED has no error code: no error stopped the replay, yet it proved nothing.
    failure = (
        (NOT_REPRODUCED, NOT_REPRODUCED_WHY)
        if report["error_code"] is None
        else (report["error_code"], report["error_message"])
    )
    print("mace: {}: {}".format(*failure), file=sys.stderr)
    return EXIT_FAILED


def _whatif(args: argparse.Namespace, settings: Settings, actor: Actor) -> int:
    """``mace replay JOB --with KEY=ID ...``: the job re-run under the changes, recorded."""
    counterfactuals.of_stored_job(args, "--with")
    changes = parse_with(args.changes)
    with Ledger.open(settings, create=False) as ledger:
        result = ledger.whatif.run(
            args.job_id, changes, actor, tenant=args.tenant or DEFAULT_TENANT
        )
    return counterfactuals.shown(result, args.json, render_text(result.report), "what-if")


def _bundle(args: argparse.Namespace, settings: Settings) -> Bundle | None:
    """The verified bundle ``--bundle`` names; None when a stored job is replayed."""
    if args.bundle is not None:
        return open_bundle(
            args.bundle, args.job_id, args.tenant, args.force_continue, args.public_key, settings
        )
    if args.job_id is None:
        raise InvalidInput("mace replay needs JOB_ID, or --bundle FILE")
    if args.public_key is not None:
        raise InvalidInput("--public-key pins a bundle's checkpoint key: it needs --bundle FILE")
    return None


def _mock(option: str) -> tuple[str, AgentReply]:
    name, separator, path = option.partition("=")
    if not separator or not path:
        raise InvalidInput(f"--mock {option!r}: expected AGENT=FILE")
    if name not in AGENTS:
        raise InvalidInput(
            f"--mock {option!r}: unknown agent {name!r}: expected one of {sorted(AGENTS)}"
        )
    data = read_json_object(path)
    text, claims, evidence = data.get("text"), data.get("claims", []), data.get("evidence", [])
    unknown = sorted(set(data) - {"text", "claims", "evidence"})
    if (
        unknown
        or not isinstance(text, str)
        or not all(
            isinstance(x, list) and all(isinstance(i, dict) for i in x) for x in (claims, evidence)
        )
    ):
        raise InvalidInput(
            f"--mock {option!r}: expected a JSON object with text (string) and optional claims"
            " and evidence (lists of objects)"
        )
    return name, AgentReply(text=text, claims=claims, evidence=evidence)


def _prepare(directory: Path) -> None:
    """Make sure the report can be written before the replay is recorded."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / ".mace-write-check"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise InvalidInput(
            f"--report-dir {directory}: cannot write there: {exc.strerror}"
        ) from None
    for name in (REPORT_JSON, REPORT_MD):
        target = directory / name
        if target.exists() and (not target.is_file() or not os.access(target, os.W_OK)):
            raise InvalidInput(f"--report-dir {directory}: {name} exists and cannot be overwritten")


_SHOWN = frozenset({Check.HASH_COMPARED, Check.TAKEN_AS_RECORDED, Check.MISSING})
"""The facts a text summary names one by one: those not re-executed, whose check was weaker."""


def print_report(result: ReplayResult, report_dir: Path | None) -> None:
    """A recorded attempt's verdict, what stopped it or left it non-authoritative, each
    divergence with its diff, and the facts checked less than by re-execution."""
    report = result.report
    actor = report["actor"]
    print(f"verdict: {verdict(report)}")
    print(
        f"replay of job {report['job_id']} (attempt {result.attempt}, {report['mode']},"
        f" by {actor['actor_id']} [{', '.join(actor['roles'])}])"
    )
    for step in report["steps"]:
        if step["outcome"] != "ok":
            print(f"  {step['outcome']}: {step['step']}: {step['detail']}")
    for reason in report["non_authoritative_reasons"]:
        print(f"  not authoritative: {reason}")
    for divergence in report["divergences"]:
        where = "job" if divergence["iteration"] is None else f"iteration {divergence['iteration']}"
        print(f"  {divergence['code']} at {where}, field {divergence['field']}:")
        print(f"    recorded: {canonical_json(divergence['recorded']).decode()}")
        print(f"    replayed: {canonical_json(divergence['replayed']).decode()}")
    # Divergences are printed whole below, and the verdict counts the facts left unchecked.
    for row in report["checks"]:
        if row["check"] in _SHOWN:
            print(f"  {LABELS[Check(row['check'])]}: {row['subject']}: {row['detail']}")
    for missing in report["unreconstructable"]:
        print(f"  cannot reconstruct {missing['step']}: {missing['reason']}")
    if report_dir is not None:
        print(f"report: {report_dir / REPORT_JSON} and {report_dir / REPORT_MD}")
