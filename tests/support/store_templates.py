"""Stores set up once per worker and copied for every test, instead of set up for every test.

A test's store used to be an empty database (or no file) that the test's first writer set up:
on PostgreSQL a ``CREATE DATABASE`` from ``template0`` and then the ledger's DDL, every test.
Now each worker sets up one store of each kind the way ``mace init`` does (`set_up_store`), and
every test gets a copy of it: PostgreSQL ``CREATE DATABASE ... TEMPLATE`` (a file-level copy),
SQLite a copy of the file. A test that needs a store with no tables (``mace init``, a reader
refusing a store that is not set up, the first writer setting one up) is marked
``empty_store`` and gets one as before.

A template holds tables and nothing else: no event, no key check, no checkpoint. Key checks
are written with a store's first save, signed by the writer's keys, and each test has its own
keys (`settings_for`); a template holding rows signed by other keys would make a test fail, or
pass for the wrong reason. `set_up_store` therefore proves the template holds no row at all.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any, Final

from psycopg import sql

from infrastructure.storage.backends.connection import connect_postgres
from infrastructure.storage.settings import PostgresStore, Settings, SQLiteStore, parse_store
from infrastructure.storage.store import LedgerStore
from support.store_copies import SQLITE_COMPANIONS, TABLES

MIGRATION_ROW: Final = [("__migration__", 1)]
SET_UP_ROWS: Final[dict[str, list[tuple[Any, ...]]]] = {
    "tracking": MIGRATION_ROW,
    "ledger_tracking": MIGRATION_ROW,
}
"""The rows setting up a store writes: eventsourcing records the layout of its tracking table
(SQLite's ``tracking``, PostgreSQL's ``ledger_tracking``). Nothing else, and nothing signed."""
EMPTY_STORE_MARKER = "empty_store"
EMPTY_STORE_HELP = (
    "empty_store: the test's stores have no tables (on SQLite no file), not the set-up template"
)


def set_up_store(settings: Settings) -> None:
    """Set up the store the settings name as ``mace init`` does, and prove it holds nothing."""
    LedgerStore.open(settings, create=True).close()
    prove_holds_nothing(settings)


def prove_holds_nothing(settings: Settings) -> None:
    """Raise AssertionError unless the store holds tables and no row but those set-up writes
    (`SET_UP_ROWS`); a SQLite store must be its file alone (no log beside it to copy too)."""
    store = parse_store(settings.store)
    if isinstance(store, SQLiteStore):
        rows = _sqlite_rows(store.path)
        # Closing the last connection checkpointed the log into the file: the file is the store.
        beside = [p.name for p in store.path.parent.iterdir() if p.name.startswith(store.path.name)]
        assert beside == [store.path.name], f"a SQLite template is one file, not {beside}"
    else:
        assert isinstance(store, PostgresStore)
        rows = _postgres_rows(store)
    assert rows, f"no tables are set up at {store.describe()}"
    holding = {table: held for table, held in rows.items() if held != SET_UP_ROWS.get(table, [])}
    assert holding == {}, f"a template holds tables only, but these hold rows: {holding}"


def _sqlite_rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    # A writable connection: closing it leaves no -wal or -shm file behind (a read-only one may).
    connection = sqlite3.connect(path)
    try:
        tables = [row[0] for row in connection.execute(TABLES)]
        return {
            table: connection.execute(f'SELECT * FROM "{table}"').fetchall() for table in tables
        }
    finally:
        connection.close()


def _postgres_rows(store: PostgresStore) -> dict[str, list[tuple[Any, ...]]]:
    with connect_postgres(store) as pg:
        listed = "SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = 'public'"
        tables = [str(row[0]) for row in pg.execute(listed)]
        return {
            table: list(pg.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(table))))
            for table in tables
        }


def copy_sqlite_template(template: Path, target: Path) -> None:
    """``target`` becomes a copy of the SQLite template file (in WAL mode, as the template is)."""
    for suffix in SQLITE_COMPANIONS:
        assert not template.with_name(template.name + suffix).exists(), "template in use"
    shutil.copyfile(template, target)
