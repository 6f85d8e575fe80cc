"""``mace snapshot put|show``."""

from __future__ import annotations

import argparse

from domain.canonical import CanonicalJSONError, canonical_json
from domain.errors import InvalidInput, NotFoundError
from domain.stage0.config import declare_usable
from infrastructure.application.errors import EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.cli.common import emit_json, read_json_object


def snapshot_put(args: argparse.Namespace, settings: Settings) -> int:
    payload = read_json_object(args.file)
    try:
        declared = declare_usable(args.kind, payload, args.schema_version, args.namespace)
    except (ValueError, CanonicalJSONError) as exc:
        raise InvalidInput(str(exc)) from None
    with Ledger.open(settings) as ledger:
        snapshot, created = ledger.snapshots.put(declared)
    if args.json:
        emit_json({"snapshot_id": snapshot.snapshot_id, "kind": snapshot.kind, "created": created})
    else:
        print(snapshot.snapshot_id if created else f"{snapshot.snapshot_id} (already stored)")
    return EXIT_OK


def snapshot_show(args: argparse.Namespace, settings: Settings) -> int:
    with Ledger.open(settings, create=False) as ledger:
        try:
            snapshot = ledger.snapshots.get(args.snapshot_id)
        except (ValueError, NotFoundError) as exc:
            raise InvalidInput(str(exc)) from None
    data = snapshot.as_json()
    if args.json:
        emit_json(data)
    else:
        for key in ("snapshot_id", "kind", "schema_version", "seed_namespace", "config_hash"):
            print(f"{key}: {data[key]}")
        print(f"payload: {canonical_json(snapshot.payload).decode()}")
    return EXIT_OK
