"""Raw, streaming reads of the stored events table for whole-ledger verification.

eventsourcing reads one stream or one notification page at a time; verifying everything wants one
pass ordered by (stream, version) with flat memory. This opens its own read-only connection: a
server-side cursor on PostgreSQL, lazy cursor iteration on SQLite.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import ExitStack
from uuid import UUID

import psycopg
from eventsourcing.persistence import StoredEvent
from psycopg import sql

from infrastructure.storage.connection import connect_postgres
from infrastructure.storage.settings import PostgresStore, SQLiteStore, Store

SCAN_PAGE = 2000


def _row(originator_id: UUID, version: int, topic: object, state: object) -> StoredEvent:
    """A row as eventsourcing would read it; a NULL topic or state is kept, for verification to
    refuse as an integrity failure (naming the row) rather than crash on."""
    data = bytes(state) if isinstance(state, bytes | memoryview) else state
    return StoredEvent(originator_id, version, topic, data)  # type: ignore[arg-type]


class StoreReader:
    """Ordered scans and point look-ups over one store's events table; use as a context manager.

    Two connections: one carries the long scan (a server-side cursor inside a transaction on
    PostgreSQL), the other answers look-ups made while the scan is under way.
    """

    def __init__(self, store: Store, table: str) -> None:
        self.store = store
        self.table = table
        self._stack = ExitStack()
        self._scan_conn: sqlite3.Connection | psycopg.Connection[tuple[object, ...]] | None = None
        self._lookup_conn: sqlite3.Connection | psycopg.Connection[tuple[object, ...]] | None = None

    def __enter__(self) -> StoreReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _connect(self) -> sqlite3.Connection | psycopg.Connection[tuple[object, ...]]:
        store = self.store
        if isinstance(store, SQLiteStore):
            conn = sqlite3.connect(f"file:{store.path}?mode=ro", uri=True)
            self._stack.callback(conn.close)
            return conn
        pg = connect_postgres(store)
        self._stack.callback(pg.close)
        return pg

    def _table(self) -> sql.Composable:
        store = self.store
        assert isinstance(store, PostgresStore)
        if store.schema:
            return sql.SQL("{}.{}").format(sql.Identifier(store.schema), sql.Identifier(self.table))
        return sql.Identifier(self.table)

    def _sqlite_table(self) -> str:
        # eventsourcing chose the name; quote it as an identifier all the same.
        return '"' + self.table.replace('"', '""') + '"'

    def scan(self) -> Iterator[StoredEvent]:
        """Every stored event, ordered by stream then version."""
        conn = self._scan_conn = self._scan_conn or self._connect()
        if isinstance(conn, sqlite3.Connection):
            table = self._sqlite_table()
            cursor = conn.execute(
                f"SELECT originator_id, originator_version, topic, state FROM {table} "  # noqa: S608
                "ORDER BY originator_id, originator_version"
            )
            while rows := cursor.fetchmany(SCAN_PAGE):
                for originator_id, version, topic, state in rows:
                    yield _row(UUID(originator_id), version, topic, state)
            return
        query = sql.SQL(
            "SELECT originator_id, originator_version, topic, state FROM {} "
            "ORDER BY originator_id, originator_version"
        ).format(self._table())
        with conn.transaction(), conn.cursor(name="mace_scan") as cur:
            cur.itersize = SCAN_PAGE
            cur.execute(query)
            for originator_id, version, topic, state in cur:
                assert isinstance(originator_id, UUID)
                assert isinstance(version, int)
                yield _row(originator_id, version, topic, state)

    def record_at(self, originator_id: UUID, version: int) -> StoredEvent | None:
        """The event stored at one stream position (not verified), or None when there is none."""
        conn = self._lookup_conn = self._lookup_conn or self._connect()
        if isinstance(conn, sqlite3.Connection):
            row = conn.execute(
                f"SELECT topic, state FROM {self._sqlite_table()} "  # noqa: S608
                "WHERE originator_id = ? AND originator_version = ?",
                (originator_id.hex, version),
            ).fetchone()
        else:
            query = sql.SQL(
                "SELECT topic, state FROM {} WHERE originator_id = %s AND originator_version = %s"
            ).format(self._table())
            row = conn.execute(query, (originator_id, version)).fetchone()
        return None if row is None else _row(originator_id, version, row[0], row[1])
