"""``mace sem put|get``: a tenant's semantic memory from outside any job, under rules S1-S9."""

from __future__ import annotations

import argparse

from domain.canonical import CanonicalJSONError, canonical_json
from domain.sem import SemRecord
from infrastructure.application.ledger import Ledger
from infrastructure.cli.common import (
    EXIT_OK,
    UsageError,
    add_snapshot_option,
    add_tenant_option,
    emit_json,
    parse_json_argument,
    snapshot_overrides,
)
from infrastructure.storage.settings import Settings


def add_sem_arguments(sem: argparse.ArgumentParser) -> None:
    sem_commands = sem.add_subparsers(dest="sem_command", required=True)
    put = sem_commands.add_parser("put", help="store a fact under a canonical key")
    put.add_argument("key", help="<scope>/<entity_type>/<entity_id>/<attribute>")
    put.add_argument("value", metavar="JSON", help="the value as JSON, e.g. '\"Paris\"' or 42")
    add_tenant_option(put)
    add_snapshot_option(put)
    put.add_argument("--json", action="store_true", help="print canonical JSON")
    put.set_defaults(handler=sem_put)
    get = sem_commands.add_parser("get", help="read the fact under a key")
    get.add_argument("key", help="<scope>/<entity_type>/<entity_id>/<attribute>")
    add_tenant_option(get)
    add_snapshot_option(get)
    get.add_argument("--json", action="store_true", help="print canonical JSON")
    get.set_defaults(handler=sem_get)


def sem_put(args: argparse.Namespace, settings: Settings) -> int:
    value = parse_json_argument("value", args.value)
    overrides = snapshot_overrides(args.snapshot)
    with Ledger.open(settings) as ledger:
        try:
            key, record = ledger.sem_put(args.key, value, overrides, args.tenant)
        except (ValueError, CanonicalJSONError) as exc:
            raise UsageError(str(exc)) from None
    _show(key, record, args.json)
    return EXIT_OK


def sem_get(args: argparse.Namespace, settings: Settings) -> int:
    overrides = snapshot_overrides(args.snapshot)
    with Ledger.open(settings, create=False) as ledger:
        try:
            key, record = ledger.sem_get(args.key, overrides, args.tenant)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    _show(key, record, args.json)
    return EXIT_OK


def _show(key: str, record: SemRecord, as_json: bool) -> None:
    if as_json:
        emit_json({"key": key, **record.as_json()})
    elif record.exists:
        value = canonical_json(record.value).decode()
        print(f"{key} = {value} (last updated {record.last_updated})")
    else:
        print(f"{key}: not stored")
