"""``mace snapshot put|show`` and ``mace verify --all``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from domain.canonical import CanonicalJSONError, canonical_json
from domain.errors import MaceError
from domain.snapshot import Snapshot, SnapshotKind
from infrastructure.cli.common import EXIT_FAILED, EXIT_OK, UsageError, emit_json, read_json_object
from infrastructure.ledger import Ledger, NotFoundError
from infrastructure.settings import Settings


def add_parsers(commands: Any) -> None:
    snapshot = commands.add_parser("snapshot", help="declare and inspect snapshots")
    snapshot_commands = snapshot.add_subparsers(dest="snapshot_command", required=True)
    put = snapshot_commands.add_parser("put", help="store a snapshot from a JSON file")
    put.add_argument("--kind", required=True, help=", ".join(k.value for k in SnapshotKind))
    put.add_argument("file", help="JSON object file, or - for standard input")
    put.add_argument("--schema-version", type=int, default=1)
    put.add_argument("--namespace", help="seed namespace of the id (default mace/<kind>)")
    put.add_argument("--json", action="store_true", help="print canonical JSON")
    put.set_defaults(handler=snapshot_put)
    show = snapshot_commands.add_parser("show", help="print a stored snapshot")
    show.add_argument("snapshot_id")
    show.add_argument("--json", action="store_true", help="print canonical JSON")
    show.set_defaults(handler=snapshot_show)

    verify = commands.add_parser("verify", help="check MACs, stream contiguity and seals")
    verify.add_argument("--all", action="store_true", required=True, help="verify every stream")
    verify.add_argument("--json", action="store_true", help="print canonical JSON")
    verify.set_defaults(handler=verify_all)


def snapshot_put(args: argparse.Namespace, settings: Settings) -> int:
    payload = read_json_object(args.file)
    try:
        declared = Snapshot.declare(args.kind, payload, args.schema_version, args.namespace)
    except (ValueError, CanonicalJSONError) as exc:
        raise UsageError(str(exc)) from None
    with Ledger.open(settings) as ledger:
        snapshot, created = ledger.put_snapshot(declared)
    if args.json:
        emit_json({"snapshot_id": snapshot.snapshot_id, "kind": snapshot.kind, "created": created})
    else:
        print(snapshot.snapshot_id if created else f"{snapshot.snapshot_id} (already stored)")
    return EXIT_OK


def snapshot_show(args: argparse.Namespace, settings: Settings) -> int:
    with Ledger.open(settings, create=False) as ledger:
        try:
            snapshot = ledger.get_snapshot(args.snapshot_id)
        except (ValueError, NotFoundError) as exc:
            raise UsageError(str(exc)) from None
    data = {
        "snapshot_id": snapshot.snapshot_id,
        "kind": snapshot.kind,
        "schema_version": snapshot.schema_version,
        "seed_namespace": snapshot.seed_namespace,
        "config_hash": snapshot.config_hash,
        "generator": snapshot.generator,
        "payload": snapshot.payload,
    }
    if args.json:
        emit_json(data)
    else:
        for key in ("snapshot_id", "kind", "schema_version", "seed_namespace", "config_hash"):
            print(f"{key}: {data[key]}")
        print(f"payload: {canonical_json(snapshot.payload).decode()}")
    return EXIT_OK


def verify_all(args: argparse.Namespace, settings: Settings) -> int:
    with Ledger.open(settings, create=False) as ledger:
        try:
            summary = ledger.verify_all()
        except MaceError as exc:
            if args.json:
                emit_json({"ok": False, "error_code": exc.code.value, **exc.details})
            print(f"mace: {exc}", file=sys.stderr)
            return EXIT_FAILED
    counts = {
        "events": summary.events,
        "streams": summary.streams,
        "jobs": summary.jobs,
        "sealed_jobs": summary.sealed_jobs,
    }
    if args.json:
        emit_json({"ok": True, "error_code": None, **counts})
    else:
        print(
            f"ok: {summary.events} events in {summary.streams} streams verified "
            f"({summary.jobs} jobs, {summary.sealed_jobs} sealed)"
        )
    return EXIT_OK
