"""``mace``: the command line. Thin: parse, validate, call one ledger use case, print.

Exit codes: 0 success; 1 the operation ran and failed (integrity failure, unreachable store);
2 bad usage or input, in which case nothing has been written. Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any, NoReturn

import orjson
from eventsourcing.persistence import PersistenceError
from pydantic import ValidationError

from domain.canonical import CanonicalJSONError, canonical_json
from domain.errors import MaceError
from domain.snapshot import Snapshot, SnapshotKind
from infrastructure.keyring import KeyringError
from infrastructure.ledger import Ledger, NotFoundError
from infrastructure.settings import Settings, SettingsError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad usage or input: exit 2, nothing written."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def build_parser() -> Parser:
    parser = Parser(
        prog="mace", description="MACE Ledger: signed, replayable records of agent runs."
    )
    parser.add_argument("--version", action="version", version=f"mace {version('mace-ledger')}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    snapshot = commands.add_parser("snapshot", help="declare and inspect snapshots")
    snapshot_commands = snapshot.add_subparsers(dest="snapshot_command", required=True)
    put = snapshot_commands.add_parser("put", help="store a snapshot from a JSON file")
    put.add_argument("--kind", required=True, help=", ".join(k.value for k in SnapshotKind))
    put.add_argument("file", help="JSON object file, or - for standard input")
    put.add_argument("--schema-version", type=int, default=1)
    put.add_argument("--namespace", help="seed namespace of the id (default mace/<kind>)")
    put.add_argument("--json", action="store_true", help="print canonical JSON")
    show = snapshot_commands.add_parser("show", help="print a stored snapshot")
    show.add_argument("snapshot_id")
    show.add_argument("--json", action="store_true", help="print canonical JSON")

    verify = commands.add_parser("verify", help="check MACs, stream contiguity and seals")
    verify.add_argument("--all", action="store_true", required=True, help="verify every stream")
    verify.add_argument("--json", action="store_true", help="print canonical JSON")
    return parser


def emit_json(data: dict[str, Any]) -> None:
    sys.stdout.buffer.write(canonical_json(data) + b"\n")
    sys.stdout.flush()


def read_json_object(source: str) -> dict[str, Any]:
    name = "standard input" if source == "-" else source
    try:
        raw = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror}") from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{name} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{name} must hold a JSON object, not {type(data).__name__}")
    return data


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


def dispatch(args: argparse.Namespace, settings: Settings) -> int:
    if args.command == "snapshot":
        handler = snapshot_put if args.snapshot_command == "put" else snapshot_show
        return handler(args, settings)
    return verify_all(args, settings)


def load_settings() -> Settings:
    try:
        settings = Settings()
        settings.parsed_store()
    except ValidationError as exc:
        first = exc.errors()[0]
        field = "MACE_" + str(first["loc"][0]).upper() if first["loc"] else "settings"
        raise UsageError(f"invalid {field}: {first['msg']}") from None
    except SettingsError as exc:
        raise UsageError(str(exc)) from None
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="mace: warning: %(message)s")
    try:
        args = build_parser().parse_args(argv)
        return dispatch(args, load_settings())
    except UsageError as exc:
        print(f"mace: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (KeyringError, NotFoundError) as exc:
        print(f"mace: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MaceError as exc:
        print(f"mace: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except (PersistenceError, OSError) as exc:
        print(f"mace: error: store unavailable: {exc}".splitlines()[0], file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
