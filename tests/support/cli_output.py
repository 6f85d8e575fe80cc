"""What ``mace`` prints: canonical JSON lines, one-line errors, and what a store holds."""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson
import psycopg

from domain.canonical import canonical_json
from infrastructure.storage.settings import Settings, SQLiteStore
from support.ledger_fixtures import RawTable


def canonical_line(line: str) -> dict[str, Any]:
    """One line of canonical JSON (sorted keys, no whitespace), parsed."""
    assert line.endswith("\n") and line.count("\n") == 1
    data = orjson.loads(line)
    assert isinstance(data, dict)
    assert canonical_json(data).decode() == line[:-1]
    return data


def json_lines(out: str) -> list[dict[str, Any]]:
    return [canonical_line(line + "\n") for line in out.splitlines()]


def event_count(settings: Settings) -> int:
    """Rows in the event table; 0 when the store or its table does not exist yet."""
    store = settings.parsed_store()
    if isinstance(store, SQLiteStore) and not store.path.exists():
        return 0
    try:
        rows = RawTable(settings).execute("SELECT COUNT(*) FROM {table}")
    except (sqlite3.OperationalError, psycopg.errors.UndefinedTable):
        return 0
    return int(rows[0][0])


def assert_usage_error(code: int, out: str, err: str, message: str) -> None:
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("mace: error: "), err
    assert message in err, err


def assert_failure_line(err: str, code: str, message: str | None = None) -> None:
    """Exactly one stderr line, ``mace: <CODE>: <message>``."""
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith(f"mace: {code}: "), err
    if message is not None:
        assert err == f"mace: {code}: {message}\n"
