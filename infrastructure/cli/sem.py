"""``mace sem put|get``: a tenant's semantic memory from outside any job, under rules S1-S9."""

from __future__ import annotations

import argparse

from domain.canonical import CanonicalJSONError, canonical_json
from domain.errors import InvalidInput
from domain.sem import SemRecord
from infrastructure.application.errors import EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.cli.common import (
    emit_json,
    parse_json_argument,
    reading_actor,
    snapshot_overrides,
)


def sem_put(args: argparse.Namespace, settings: Settings) -> int:
    value = parse_json_argument("value", args.value)
    overrides = snapshot_overrides(args.snapshot)
    with Ledger.open(settings) as ledger:
        try:
            key, record = ledger.sem.put(args.key, value, overrides, args.tenant)
        except (ValueError, CanonicalJSONError) as exc:
            raise InvalidInput(str(exc)) from None
    _show(key, record, args.json)
    return EXIT_OK


def sem_get(args: argparse.Namespace, settings: Settings) -> int:
    overrides = snapshot_overrides(args.snapshot)
    reader = reading_actor(settings)
    with Ledger.open(settings, create=False) as ledger:
        key, record = ledger.sem.shown(args.key, reader, overrides, args.tenant)
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
