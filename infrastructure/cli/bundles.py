"""``mace export``, ``mace import`` and ``mace export-test``: run bundles (and ``replay --bundle``).

A bundle is one signed file holding a job and everything its replay reads (infrastructure/bundle.py
says what). Bad input (a file that is not a bundle, a job that cannot be exported, an existing
output without ``--force``, a conflicting import) exits 2 and writes nothing; a bundle that fails
verification exits 1 with ``INTEGRITY_FAILURE``, as does one whose checkpoint is not signed by
the key ``--public-key`` pins.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from domain.errors import InvalidInput
from domain.governance import Actor
from domain.job import validate_job_id
from domain.naming import tenant_scoped
from domain.replay_access import ReplayMode
from domain.stage0.agents import AgentReply
from infrastructure.application.checkpoints import PublicCheckpointKey, public_key_from_pem
from infrastructure.application.errors import EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.records import configured_keyring
from infrastructure.application.replays import ReplayResult
from infrastructure.application.settings import Settings
from infrastructure.bundles.export import export_bundle
from infrastructure.bundles.format import Bundle, parse_bundle, read_bundle
from infrastructure.bundles.importing import import_bundle
from infrastructure.bundles.regression import (
    Expectation,
    recorded_expectation,
    regression_file_names,
    render_test,
)
from infrastructure.bundles.replay import REGRESSION_ACTOR, check_replay_options, replay_bundle
from infrastructure.cli.common import emit_json


def _job_id(job_id: str) -> str:
    return validate_job_id(job_id)


def _refuse_existing(path: Path, force: bool) -> None:
    if path.exists() and not (force and path.is_file()):
        hint = "" if force else ": pass --force to overwrite it"
        raise InvalidInput(f"{path} exists{hint}")


def _write(path: Path, data: bytes) -> None:
    """Write all of ``data`` or nothing: a new file beside it (umask mode), renamed over it."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("xb") as handle:
            handle.write(data)
        temporary.replace(path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise InvalidInput(f"cannot write {path}: {exc.strerror}") from None


def pinned_key(path: Path | None) -> PublicCheckpointKey | None:
    """The checkpoint public key ``--public-key`` names, if it names one."""
    if path is None:
        return None
    try:
        pem = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not text"
        raise InvalidInput(f"--public-key {path}: cannot read it: {reason}") from None
    try:
        return public_key_from_pem(pem)
    except InvalidInput as exc:
        raise InvalidInput(f"--public-key {path}: {exc}") from None


def _prepare_directory(directory: Path) -> None:
    if directory.exists() and not directory.is_dir():
        raise InvalidInput(f"{directory} is not a directory")
    if not directory.parent.is_dir() and not directory.exists():
        raise InvalidInput(f"cannot write to {directory}: {directory.parent} does not exist")


# export


def export_job(args: argparse.Namespace, settings: Settings) -> int:
    job_id = _job_id(args.job_id)
    output: Path = args.output
    _refuse_existing(output, args.force)
    if not output.parent.is_dir():
        raise InvalidInput(f"cannot write {output}: {output.parent} is not a directory")
    with Ledger.open(settings, create=False) as ledger:
        data = export_bundle(
            ledger,
            job_id,
            tenant=args.tenant,
            redacted=args.redact,
            include_full_io=args.include_full_io,
            log_origin=settings.log_origin,
        )
        # What we write reads back, its checkpoint signed by this ledger's own key.
        bundle = parse_bundle(
            data, str(output), ledger.records.keyring, ledger.checkpoints.public_key
        )
    _write(output, data)
    summary = _export_summary(bundle, output, data)
    if args.json:
        emit_json(summary)
        return EXIT_OK
    counts = bundle.manifest.counts
    print(
        f"exported job {job_id} to {output}: {counts['records']} records in"
        f" {counts['streams']} streams ({counts['snapshot']} snapshots, {counts['sem']} SEM"
        f" entries, {counts['governance']} governance records), key ids {summary['key_ids']}"
    )
    print(f"  {bundle.inclusion.summary()}")
    for snapshot_id in bundle.manifest.missing_snapshots:
        print(f"  snapshot {snapshot_id} is not in the ledger: not in the bundle either")
    redaction = bundle.manifest.redaction
    if redaction is None:
        print("  not redacted: it holds every recorded value, model I/O included")
        return EXIT_OK
    print(f"  redacted: {len(redaction.records)} records rewritten (see its manifest)")
    for item in redaction.records:
        print(f"    {item.stream} version {item.version}: {', '.join(item.paths)}")
    for omitted in redaction.omitted_streams:
        print(f"    left out {omitted.name}: {omitted.reason}")
    return EXIT_OK


def _export_summary(bundle: Bundle, output: Path, data: bytes) -> dict[str, Any]:
    manifest = bundle.manifest
    return {
        "job_id": manifest.job_id,
        "tenant": manifest.tenant,
        "file": str(output),
        "sha256": hashlib.sha256(data).hexdigest(),
        "counts": manifest.counts,
        "key_ids": manifest.key_ids,
        "missing_snapshots": manifest.missing_snapshots,
        "redacted": manifest.redacted,
        "redacted_records": 0 if manifest.redaction is None else len(manifest.redaction.records),
        "checkpoint": bundle.inclusion.facts(),
    }


# import


def import_job(args: argparse.Namespace, settings: Settings) -> int:
    keyring = configured_keyring(settings)
    pinned = pinned_key(args.public_key)
    bundle = read_bundle(args.file, keyring, pinned)
    with Ledger.open(settings) as ledger:
        summary = import_bundle(ledger, bundle)
    if args.json:
        emit_json(
            {
                "job_id": summary.job_id,
                "tenant": summary.tenant,
                "records_written": summary.written,
                "streams_written": summary.streams_written,
                "streams_present": summary.streams_present,
                "governance_not_imported": summary.governance_left,
                "checkpoint": bundle.inclusion.facts(),
            }
        )
        return EXIT_OK
    print(
        f"imported job {summary.job_id} from {args.file}: {summary.written} records written"
        f" ({len(summary.streams_written)} streams), {len(summary.streams_present)} streams"
        " already here with the same bytes"
    )
    print(f"  {bundle.inclusion.summary()}")
    if summary.governance_left:
        print(
            f"  {len(summary.governance_left)} governance record(s) not imported: approvals, halts"
            " and replay results belong to the store they were made in"
        )
    return EXIT_OK


# replay --bundle


def open_bundle(
    path: Path,
    job_id: str | None,
    tenant: str | None,
    force_continue: bool,
    public_key: Path | None,
    settings: Settings,
) -> Bundle:
    """The bundle ``mace replay --bundle`` reads, verified with the keyring the settings name
    (and the pinned checkpoint key, if any), checked against the options before anything (a
    report directory) is written."""
    keyring = configured_keyring(settings)
    pinned = pinned_key(public_key)
    bundle = read_bundle(path, keyring, pinned)
    check_replay_options(bundle, force_continue)
    if job_id is not None and job_id != bundle.job_id:
        raise InvalidInput(f"bundle {path} holds job {bundle.job_id}, not {job_id}")
    if tenant is not None and tenant != bundle.tenant:
        raise InvalidInput(f"bundle {path} holds a job of tenant {bundle.tenant}, not {tenant}")
    return bundle


def replay_from_bundle(
    bundle: Bundle,
    mode: ReplayMode,
    actor: Actor,
    force_continue: bool,
    mocks: Mapping[str, AgentReply],
) -> ReplayResult:
    return replay_bundle(bundle, mode, actor, force_continue=force_continue, mocks=mocks)


# export-test


def export_test(args: argparse.Namespace, settings: Settings) -> int:
    job_id = _job_id(args.job_id)
    named = tenant_scoped(args.tenant, job_id)  # two tenants' jobs of one id get two tests
    directory: Path = args.output
    module, bundle_name = regression_file_names(named)
    test_path, bundle_path = directory / f"{module}.py", directory / bundle_name
    _prepare_directory(directory)
    for path in (test_path, bundle_path):
        _refuse_existing(path, args.force)
    with Ledger.open(settings, create=False) as ledger:
        data = export_bundle(
            ledger,
            job_id,
            tenant=args.tenant,
            include_full_io=args.include_full_io,
            log_origin=settings.log_origin,
        )
        expected = recorded_expectation(ledger, job_id, args.tenant)
        bundle = parse_bundle(data, bundle_name, ledger.records.keyring)
    if expected is None:
        report = replay_bundle(bundle, ReplayMode.AUDIT, REGRESSION_ACTOR).report
        provenance = (
            "an audit replay of the bundle made when this test was exported (the job had no"
            " replay result on record)"
        )
        expected = Expectation.of_report(report, provenance, REGRESSION_ACTOR)
    else:
        mode = ReplayMode(expected.mode)
        force = expected.force_continue
        report = replay_bundle(bundle, mode, expected.actor, force_continue=force).report
    source = render_test(named, bundle_name, expected)
    try:
        directory.mkdir(exist_ok=True)
    except OSError as exc:
        raise InvalidInput(f"cannot create {directory}: {exc.strerror}") from None
    _write(bundle_path, data)
    _write(test_path, source.encode("utf-8"))
    differences = expected.differences(report)
    if args.json:
        asserts = {
            "ok": expected.ok,
            "error_code": expected.error_code,
            "divergences": expected.divergence_count,
        }
        emit_json(
            {
                "job_id": job_id,
                "tenant": args.tenant,
                "test_file": str(test_path),
                "bundle_file": str(bundle_path),
                "asserts": asserts,
                "differences": differences,
            }
        )
    else:
        verdict = "ok" if expected.ok else f"fails with {expected.error_code}"
        print(
            f"wrote {test_path} and {bundle_path}: the test asserts that job {job_id}'s replay"
            f" {verdict} ({expected.divergence_count} divergence(s))"
        )
    if differences:
        print(
            "mace: warning: replaying the bundle now gives "
            f"{'; '.join(differences)}: the new test fails until that is explained",
            file=sys.stderr,
        )
    return EXIT_OK
