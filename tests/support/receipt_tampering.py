"""Tampering with stored receipts as someone with database access could: for the receipt tests.

`edit_receipt` rewrites a receipt's stored body in place, leaving its envelope (and so its MAC)
as it was, and `flip_memory_byte` a tenant's first memory; `refuse_new_receipts` installs a
trigger that refuses every insert into the events table, so the next write fails the way a broken
audit store would.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import orjson

from domain.memories import MemoryLog
from domain.receipt import Receipt
from infrastructure.storage.settings import Settings, SQLiteStore
from support.ledger_fixtures import RawTable


def edit_receipt(
    settings: Settings, receipt_id: str, edit: Callable[[dict[str, Any]], object]
) -> None:
    """Rewrite the receipt's stored body in place, leaving its envelope (and MAC) as it was."""
    raw = RawTable(settings)
    stream = Receipt.id_for(receipt_id)
    state = raw.state(stream, 1)
    start = len(b".".join(state.split(b".", 3)[:3])) + 1  # after "mace1.<key id>.<mac>."
    head, fields = state[:start], orjson.loads(state[start:])
    edit(fields)
    raw.set_column(stream, 1, "state", head + orjson.dumps(fields, option=orjson.OPT_SORT_KEYS))


def flip_memory_byte(settings: Settings, tenant: str) -> None:
    """Flip one byte of the tenant's first memory, leaving its MAC as it was."""
    raw = RawTable(settings)
    stream = MemoryLog.id_for(tenant)
    state = bytearray(raw.state(stream, 2))
    state[-3] ^= 1
    raw.set_column(stream, 2, "state", bytes(state))


def refuse_new_receipts(settings: Settings) -> None:
    store = settings.parsed_store()
    raw = RawTable(settings)
    if isinstance(store, SQLiteStore):
        conn = sqlite3.connect(store.path)
        conn.execute(
            "CREATE TRIGGER refuse_writes BEFORE INSERT ON stored_events "
            "BEGIN SELECT RAISE(ABORT, 'audit store is read-only'); END"
        )
        conn.commit()
        conn.close()
        return
    raw.execute(
        "CREATE FUNCTION refuse_writes() RETURNS trigger AS $$ BEGIN "
        "RAISE EXCEPTION 'audit store is read-only'; END $$ LANGUAGE plpgsql"
    )
    raw.execute(
        "CREATE TRIGGER refuse_writes BEFORE INSERT ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION refuse_writes()"
    )
