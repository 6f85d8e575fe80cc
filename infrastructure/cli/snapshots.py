"""``mace snapshot put|show``."""

from __future__ import annotations

import argparse

from domain.canonical import CanonicalJSONError, canonical_json
from domain.snapshot import SnapshotKind
from domain.stage0.config import declare_usable
from infrastructure.application.ledger import Ledger, NotFoundError
from infrastructure.cli.common import EXIT_OK, UsageError, emit_json, read_json_object
from infrastructure.storage.settings import Settings


def add_snapshot_arguments(snapshot: argparse.ArgumentParser) -> None:
    snapshot_commands = snapshot.add_subparsers(dest="snapshot_command", required=True)
    put = snapshot_commands.add_parser("put", help="store a snapshot from a JSON file")
    put.add_argument("--kind", required=True, help=", ".join(k.value for k in SnapshotKind))
    put.add_argument("file", help="JSON object file, or - for standard input")
    put.add_argument(
        "--schema-version", type=int, default=1, help="the payload's schema version (1)"
    )
    put.add_argument("--namespace", help="seed namespace of the id (default mace/<kind>)")
    put.add_argument("--json", action="store_true", help="print canonical JSON")
    put.set_defaults(handler=snapshot_put)
    show = snapshot_commands.add_parser("show", help="print a stored snapshot")
    show.add_argument("snapshot_id", help="the snapshot's id (mace snapshot put prints it)")
    show.add_argument("--json", action="store_true", help="print canonical JSON")
    show.set_defaults(handler=snapshot_show)


def snapshot_put(args: argparse.Namespace, settings: Settings) -> int:
    payload = read_json_object(args.file)
    try:
        declared = declare_usable(args.kind, payload, args.schema_version, args.namespace)
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
    data = snapshot.as_json()
    if args.json:
        emit_json(data)
    else:
        for key in ("snapshot_id", "kind", "schema_version", "seed_namespace", "config_hash"):
            print(f"{key}: {data[key]}")
        print(f"payload: {canonical_json(snapshot.payload).decode()}")
    return EXIT_OK
