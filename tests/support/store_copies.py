"""Copies of a store, as a replica or a backup holds one, and what a store holds, to compare.

SQLite copies through its backup API; PostgreSQL as ``CREATE DATABASE copy TEMPLATE source``
(no one may be connected to the source meanwhile). `fingerprint` reads a store without writing
to it (SQLite read-only, PostgreSQL a read-only session), so that a test can tell that something
else did not write either.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from psycopg import sql

from infrastructure.storage.backends.connection import connect_postgres
from infrastructure.storage.settings import PostgresStore, SQLiteStore, parse_store
from support.postgres_server import PostgresServer, copy_database, drop_database

# SQLite's own files beside a database opened in WAL mode, by any reader.
SQLITE_COMPANIONS = ("-wal", "-shm")
_copy_numbers = itertools.count(1)
TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"


def copy_store(server: PostgresServer | None, source: str, name: str, directory: Path) -> str:
    """A copy of the store at ``source`` (a URL) named ``name``; its URL."""
    if server is None:
        target = directory / f"{name}.db"
        src = sqlite3.connect(source.removeprefix("sqlite:///"))
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
        finally:
            dst.close()
            src.close()
        return f"sqlite:///{target}"
    return copy_database(server, source.rsplit("/", 1)[1], name)


@pytest.fixture
def store_copy(
    store_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[[], str]]:
    """Call it for a copy of ``store_url`` as it stands (a new one each call; dropped after)."""
    server: PostgresServer | None = None
    if not store_url.startswith("sqlite"):
        server = request.getfixturevalue("postgres_server")
    names: list[str] = []

    def copy() -> str:
        name = f"mace_t_{os.getpid()}_copy_{next(_copy_numbers)}"
        names.append(name)
        return copy_store(server, store_url, name, tmp_path)

    yield copy
    if server is not None:
        for name in names:
            drop_database(server, name)


Fingerprint = tuple[str, dict[str, int]]


def fingerprint(url: str) -> Fingerprint:
    """What the store at ``url`` holds: SQLite, its file's SHA-256 and the files beside it
    (SQLite's own WAL companions aside); PostgreSQL, its tables; with each table's row count."""
    store = parse_store(url, read_only=True)
    if isinstance(store, SQLiteStore):
        return _sqlite_fingerprint(store)
    assert isinstance(store, PostgresStore)
    return "postgresql", _postgres_counts(store)


def _sqlite_fingerprint(store: SQLiteStore) -> Fingerprint:
    digest = hashlib.sha256(store.path.read_bytes()).hexdigest()
    companions = {store.path.name + suffix for suffix in SQLITE_COMPANIONS}
    beside = sorted(
        p.name
        for p in store.path.parent.iterdir()
        if p.name.startswith(store.path.name) and p.name not in companions
    )
    connection = sqlite3.connect(f"{store.path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        tables = [row[0] for row in connection.execute(TABLES)]
        counts = {
            table: connection.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
            for table in tables
        }
    finally:
        connection.close()
    return f"{digest} {beside}", counts


def _postgres_counts(store: PostgresStore) -> dict[str, int]:
    with connect_postgres(store) as pg:
        tables = [
            str(row[0])
            for row in pg.execute(
                "SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = 'public'"
            )
        ]
        counts = {}
        for table in tables:
            query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
            row = pg.execute(query).fetchone()
            assert row is not None
            counts[table] = int(str(row[0]))
    return counts
