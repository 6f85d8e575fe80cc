"""The raw store beside each `mace bench --compare-raw` figure: the same rows, no ledger.

While a figure runs, the store tallies what the ledger did in its events table (`IoTally`): rows
read, rows written, and the commits that wrote them. Right after the figure, in the same round
and on the same store, the raw baseline does that I/O again with nothing else:

- the rows the figure wrote (their topics and states, as stored) are inserted again, under new
  stream ids, into a scratch table made like the events table, with plain INSERTs at the same
  rows per commit (as many commits as the figure made);
- as many rows as the figure read are read back from the events table in notification order by
  a plain cursor (server-side on PostgreSQL, pages on SQLite), each row's state put through
  HMAC-SHA256 and parsed with orjson.

A figure's raw rate is its count over those seconds; the ratio, the ledger's rate over it. The
scratch table (`RAW_TABLE`) is dropped when the bench ends. The concurrency figure's writers use
`open_raw` to insert a job's rows per commit into it, each in a process of its own.
"""

from __future__ import annotations

import hashlib
import hmac
import sqlite3
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Final, Protocol

import orjson
from psycopg import sql

from infrastructure.application.settings import PostgresStore, SQLiteStore, Store
from infrastructure.application.store_status import IoTally, StoreStatus, connect_postgres

RAW_TABLE: Final = "mace_bench_raw"
PAGE: Final = 1000
RAW_KEY: Final = bytes(range(32))
"""Any 32 bytes: what an HMAC costs does not depend on its key."""

Row = tuple[str, bytes]
"""A stored event's topic and state."""


def _checked(state: bytes) -> None:
    """An HMAC over the row's bytes and its JSON parsed: the ledger's state is a signed
    envelope (`signed_record`), ``mace1.<key id>.<mac>.<json body>``."""
    hmac.new(RAW_KEY, state, hashlib.sha256).digest()
    orjson.loads(state.split(b".", 3)[-1])


def _bytes(state: object) -> bytes:
    assert isinstance(state, bytes | memoryview)  # psycopg gives bytea as bytes
    return bytes(state)


def _groups(rows: Sequence[Row], commits: int) -> Iterator[Sequence[Row]]:
    """``rows`` in ``commits`` consecutive groups of as near the same size as can be."""
    size, extra = divmod(len(rows), commits)
    start = 0
    for n in range(commits):
        end = start + size + (1 if n < extra else 0)
        if end > start:
            yield rows[start:end]
        start = end


def _fresh_ids(rows: Sequence[Row]) -> list[tuple[str, int, str, bytes]]:
    """The rows as new events of one new stream each group would be: new id, versions 1..n."""
    stream = str(uuid.uuid4())
    return [(stream, version, topic, state) for version, (topic, state) in enumerate(rows, 1)]


class RawStore(Protocol):
    def written_after(self, position: int, count: int) -> list[Row]: ...
    def insert(self, rows: Sequence[Row], commits: int) -> None: ...
    def read(self, count: int) -> None: ...
    def drop(self) -> None: ...
    def close(self) -> None: ...


class PostgresRaw:
    def __init__(self, store: PostgresStore, events: str) -> None:
        self._connection = connect_postgres(store)
        schema = sql.Identifier(store.schema or "public")  # eventsourcing's default, too
        self._events = sql.SQL("{}.{}").format(schema, sql.Identifier(events))
        self._raw = sql.SQL("{}.{}").format(schema, sql.Identifier(RAW_TABLE))

    def make_table(self) -> None:
        self.drop()
        self._connection.execute(
            sql.SQL(
                "CREATE TABLE {} (originator_id uuid NOT NULL, originator_version bigint NOT NULL,"
                " topic text, state bytea, notification_id bigserial,"
                " PRIMARY KEY (originator_id, originator_version))"
            ).format(self._raw)
        )
        self._connection.execute(
            sql.SQL("CREATE UNIQUE INDEX ON {} (notification_id)").format(self._raw)
        )

    def written_after(self, position: int, count: int) -> list[Row]:
        statement = sql.SQL(
            "SELECT topic, state FROM {} WHERE notification_id > %s"
            " ORDER BY notification_id LIMIT %s"
        ).format(self._events)
        rows = self._connection.execute(statement, (position, count)).fetchall()
        return [(str(topic), _bytes(state)) for topic, state in rows]

    def insert(self, rows: Sequence[Row], commits: int) -> None:
        statement = sql.SQL(
            "INSERT INTO {} (originator_id, originator_version, topic, state)"
            " VALUES (%s, %s, %s, %s)"
        ).format(self._raw)
        for group in _groups(rows, commits):
            with self._connection.transaction(), self._connection.cursor() as cursor:
                cursor.executemany(statement, _fresh_ids(group))

    def read(self, count: int) -> None:
        statement = sql.SQL(
            "SELECT originator_id, originator_version, topic, state FROM {}"
            " ORDER BY notification_id LIMIT %s"
        ).format(self._events)
        left = count
        while left > 0:
            read = 0
            with self._connection.transaction(), self._connection.cursor("raw read") as cursor:
                cursor.itersize = PAGE
                cursor.execute(statement, (left,))
                for row in cursor:
                    _checked(_bytes(row[3]))
                    read += 1
            if read == 0:
                break
            left -= read  # a figure may read more rows than the table holds: read it again

    def drop(self) -> None:
        self._connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(self._raw))

    def close(self) -> None:
        self._connection.close()


class SQLiteRaw:
    def __init__(self, store: SQLiteStore, events: str) -> None:
        # No transaction is begun implicitly: each insert group is one BEGIN ... COMMIT.
        self._connection = sqlite3.connect(store.path, isolation_level=None, timeout=5)
        self._events = events

    def make_table(self) -> None:
        self.drop()
        self._connection.execute(
            f"CREATE TABLE {RAW_TABLE} (originator_id TEXT, originator_version INTEGER,"
            " topic TEXT, state BLOB, PRIMARY KEY (originator_id, originator_version))"
        )

    def written_after(self, position: int, count: int) -> list[Row]:
        statement = (
            f"SELECT topic, state FROM {self._events} WHERE rowid > ?"  # noqa: S608
            " ORDER BY rowid LIMIT ?"
        )
        return [(t, s) for t, s in self._connection.execute(statement, (position, count))]

    def insert(self, rows: Sequence[Row], commits: int) -> None:
        statement = f"INSERT INTO {RAW_TABLE} VALUES (?, ?, ?, ?)"  # noqa: S608
        for group in _groups(rows, commits):
            self._connection.execute("BEGIN")
            self._connection.executemany(statement, _fresh_ids(group))
            self._connection.execute("COMMIT")

    def read(self, count: int) -> None:
        statement = (
            f"SELECT rowid, originator_id, originator_version, topic, state FROM {self._events}"  # noqa: S608
            " WHERE rowid > ? ORDER BY rowid LIMIT ?"
        )
        left, after = count, 0
        while left > 0:
            page = self._connection.execute(statement, (after, min(PAGE, left))).fetchall()
            if not page:
                if after == 0:
                    break
                after = 0  # a figure may read more rows than the table holds: read it again
                continue
            for row in page:
                _checked(row[4])
            left -= len(page)
            after = page[-1][0]

    def drop(self) -> None:
        self._connection.execute(f"DROP TABLE IF EXISTS {RAW_TABLE}")

    def close(self) -> None:
        self._connection.close()


def raw_store(status: StoreStatus) -> RawStore:
    """The raw access to the ledger's own store, with its scratch table made anew (empty)."""
    raw = open_raw(status.location, status.events_table)
    raw.make_table()
    return raw


def open_raw(location: Store, events_table: str = "") -> PostgresRaw | SQLiteRaw:
    """A raw connection to the store, its scratch table as it is; ``events_table``: the
    ledger's, for reads (a bench writer only inserts)."""
    if isinstance(location, SQLiteStore):
        return SQLiteRaw(location, events_table)
    return PostgresRaw(location, events_table)


def raw_work(raw: RawStore, did: IoTally, written_after: int) -> Callable[[], None]:
    """The raw store doing the I/O a figure did (``did``), whose rows were written after
    notification ``written_after``: those rows are fetched now, so that timing the work times
    only their insert and the read."""
    rows = raw.written_after(written_after, did.rows_written) if did.rows_written else []

    def work() -> None:
        if rows:
            raw.insert(rows, max(did.commits, 1))
        if did.rows_read:
            raw.read(did.rows_read)

    return work
