"""Raw, streaming reads of the stored events table for whole-ledger verification and audit.

eventsourcing reads one stream or one notification page at a time; verifying everything wants one
pass over the whole log in notification order with flat memory (`log`), each row as the store
keeps it, and each event's Merkle leaf hashed here, in Python, from the very bytes whose MAC the
verifier checks (`LogRows.leaf`: `domain.checkpoint.stream_leaf_hash`, the one definition of a
leaf); an audit (`mace audit`) one pass over a range of streams in notification order. This opens
its own read-only connection: a server-side cursor on PostgreSQL (rows in binary: a state's bytes
are not hex, an id is not parsed), lazy cursor iteration on SQLite. A row missing its topic or
state has no leaf (None), which no signed root can match.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import ExitStack, closing
from typing import Any, Final, NamedTuple, TypeVar
from uuid import UUID

import psycopg
from eventsourcing.persistence import StoredEvent
from psycopg import sql
from psycopg.types.string import ByteaBinaryLoader

from domain.checkpoint import stream_leaf_hash, stream_leaf_prefix
from domain.errors import IntegrityFailure
from infrastructure.storage.backends.connection import connect_postgres
from infrastructure.storage.checkpoints.tables import LOG_NODES
from infrastructure.storage.settings import PostgresStore, SQLiteStore, Store

SCAN_PAGE = 2000
UUID_BYTES: Final = 16


class Leaf(NamedTuple):
    """One event's place in the log: its notification id and its Merkle leaf hash (None for a
    row without topic or state)."""

    notification_id: int
    hash: bytes | None


Position = tuple[UUID, int]
"""A stream and a version in it."""

StreamRange = tuple[UUID | None, UUID | None]
"""Streams by id: from the first (inclusive) to the second (exclusive); None is open-ended."""


def _sqlite_range(lower: UUID | None, upper: UUID | None) -> tuple[str, list[str]]:
    """``streams`` as a WHERE clause over SQLite's ids (32 lowercase hex digits, so text order
    is id order). A row whose id is not such text still falls in exactly one range, and the
    open-ended first range keeps a NULL id, as a scan of everything would."""
    conditions, params = [], []
    if lower is not None:
        conditions.append("originator_id >= ?")
        params.append(lower.hex)
    if upper is not None:
        conditions.append("(originator_id < ? OR originator_id IS NULL)")
        params.append(upper.hex)
    return (f" WHERE {' AND '.join(conditions)}" if conditions else ""), params


class LeafPage(NamedTuple):
    """Consecutive leaves: their notification ids (ascending) and hashes, position for position."""

    notification_ids: list[int]
    hashes: list[bytes | None]


LogRow = tuple[int, Any, Any, Any, Any]
"""A stored event as the store keeps it: notification id, stream id (SQLite: text, 32 hex digits;
PostgreSQL: the uuid's 16 bytes), version, topic, state. A row edited by hand may hold anything
there, NULLs included: whoever reads it checks each part before trusting it."""

LeafOf = Callable[[Any, Any, Any, Any], bytes | None]
"""The Merkle leaf of a row's stream id (as stored), version, topic and state; None for a row
that has none (a part missing or of another type)."""


def _sqlite_stream(stream: object) -> bytes | None:
    """The bytes a leaf binds of a stream id as SQLite stores it (32 hex digits); None for a
    stored id that makes no leaf."""
    # The id's length is checked as text: ``bytes.fromhex`` skips whitespace, and an id written
    # with spaces in it would otherwise make the same leaf as the id without them.
    if not isinstance(stream, str) or len(stream) != 2 * UUID_BYTES:
        return None
    try:
        return bytes.fromhex(stream)
    except ValueError:
        return None


def _sqlite_leaf(stream: object, version: object, topic: object, state: object) -> bytes | None:
    """The leaf of a row as SQLite stores it (the stream id as 32 hex digits)."""
    stream_bytes = _sqlite_stream(stream)
    if stream_bytes is None:
        return None
    try:
        # A version, topic or state of another type fails here, as it fails the MAC check.
        return stream_leaf_hash(stream_bytes, version, topic, state)  # type: ignore[arg-type]
    except (TypeError, ValueError, AttributeError):
        return None


def _postgres_leaf(stream: object, version: object, topic: object, state: object) -> bytes | None:
    """The leaf of a row as PostgreSQL gives it in binary (the uuid as its 16 bytes); its
    columns' types are the table's, so only a NULL topic or state is left to refuse."""
    if not isinstance(topic, str) or not isinstance(state, bytes):
        return None
    return stream_leaf_hash(stream, version, topic, state)  # type: ignore[arg-type]


def stored_event(originator_id: UUID, version: int, topic: object, state: object) -> StoredEvent:
    """A row as eventsourcing would read it; a NULL topic or state is kept, for verification to
    refuse as an integrity failure (naming the row) rather than crash on."""
    data = bytes(state) if isinstance(state, bytes | memoryview) else state
    return StoredEvent(originator_id, version, topic, data)  # type: ignore[arg-type]


_NOTHING_READ: Final = object()


class _StreamIds:
    """Stream ids as stored (SQLite's text, PostgreSQL's 16 bytes) made UUIDs, one UUID for a
    run of rows of the same stream.

    A scan reads a stream's rows one after another (in log order too, mostly: a job is written
    in one transaction), so one comparison a row replaces parsing a UUID; and the rows of a
    stream sharing one id object, comparing and hashing them takes the identity shortcut.
    """

    __slots__ = ("_id", "_parse", "_stored")

    def __init__(self, parse: Callable[[Any], UUID]) -> None:
        self._parse = parse
        self._stored: object = _NOTHING_READ
        self._id = UUID(int=0)

    def __call__(self, stored: object) -> UUID:
        if stored != self._stored:
            try:
                self._id = self._parse(stored)
            except (TypeError, ValueError):  # SQLite's text column holds whatever was written
                reason = f"a stored event's stream id is not a UUID: {stored!r}"
                raise IntegrityFailure(str(stored), 0, reason) from None
            self._stored = stored
        return self._id


def _from_bytes(stored: bytes) -> UUID:
    return UUID(bytes=stored)


_Cursor = TypeVar("_Cursor", psycopg.Cursor[tuple[Any, ...]], psycopg.ServerCursor[tuple[Any, ...]])


def _binary(cursor: _Cursor) -> _Cursor:
    """``cursor`` (binary) giving uuid columns as their 16 bytes, for `_StreamIds`: rows in
    binary took half the time to fetch of rows as text (a state's bytes are not hex, an id is
    not parsed)."""
    cursor.adapters.register_loader("uuid", ByteaBinaryLoader)
    return cursor


LOOKUPS_PER_QUERY: Final = 500
"""Streams one look-up statement names (SQLite takes at most 32,766 parameters)."""


class StoreReader:
    """Ordered scans and point look-ups over one store's events table; use as a context manager.

    One connection, opened at the first read: look-ups made while a scan is under way run
    between two of its pages (on PostgreSQL in the scan's transaction, beside its server-side
    cursor). A second connection for them cost a verify about as much as a tenth of its reads.
    """

    def __init__(self, store: Store, table: str) -> None:
        self.store = store
        self.table = table
        self._stack = ExitStack()
        self._conn: sqlite3.Connection | psycopg.Connection[tuple[object, ...]] | None = None

    def __enter__(self) -> StoreReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _connection(self) -> sqlite3.Connection | psycopg.Connection[tuple[object, ...]]:
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def _connect(self) -> sqlite3.Connection | psycopg.Connection[tuple[object, ...]]:
        store = self.store
        if isinstance(store, SQLiteStore):
            conn = sqlite3.connect(f"file:{store.path}?mode=ro", uri=True)
            self._stack.callback(conn.close)
            return conn
        pg = connect_postgres(store)
        self._stack.callback(pg.close)
        return pg

    def _table(self, name: str | None = None) -> sql.Composable:
        """The events table (or the table ``name``) in the store's schema."""
        store = self.store
        assert isinstance(store, PostgresStore)
        table = sql.Identifier(name or self.table)
        if store.schema:
            return sql.SQL("{}.{}").format(sql.Identifier(store.schema), table)
        return table

    def _sqlite_table(self) -> str:
        # eventsourcing chose the name; quote it as an identifier all the same.
        return '"' + self.table.replace('"', '""') + '"'

    def in_log_order(
        self, streams: StreamRange, after: int, through: int
    ) -> Generator[tuple[int, StoredEvent]]:
        """Every stored event of the streams in ``streams`` with a notification id after
        ``after`` and up to ``through``, in notification order, with its notification id."""
        conn = self._connection()
        lower, upper = streams
        if isinstance(conn, sqlite3.Connection):
            where, params = _sqlite_range(lower, upper)
            window = "rowid > ? AND rowid <= ?"
            where = f"{where} AND {window}" if where else f" WHERE {window}"
            cursor = conn.execute(
                "SELECT rowid, originator_id, originator_version, topic, state"  # noqa: S608
                f" FROM {self._sqlite_table()}{where} ORDER BY rowid",
                [*params, after, through],
            )
            ids = _StreamIds(UUID)
            while rows := cursor.fetchmany(SCAN_PAGE):
                for notification_id, originator_id, version, topic, state in rows:
                    yield notification_id, stored_event(ids(originator_id), version, topic, state)
            return
        bounds = [
            sql.SQL(condition)
            for condition, bound in (("originator_id >= %s", lower), ("originator_id < %s", upper))
            if bound is not None
        ]
        query = sql.SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state FROM {}"
            " WHERE {} ORDER BY notification_id"
        ).format(
            self._table(),
            sql.SQL(" AND ").join(
                [sql.SQL("notification_id > %s AND notification_id <= %s"), *bounds]
            ),
        )
        with conn.transaction(), _binary(conn.cursor(name="mace_log", binary=True)) as cur:
            cur.execute(query, [after, through, *(b for b in streams if b is not None)])
            ids = _StreamIds(_from_bytes)
            while rows := cur.fetchmany(SCAN_PAGE):
                for notification_id, originator_id, version, topic, state in rows:
                    assert isinstance(notification_id, int)
                    assert isinstance(version, int)
                    yield notification_id, stored_event(ids(originator_id), version, topic, state)

    def records_at(self, positions: Sequence[Position]) -> dict[Position, StoredEvent]:
        """The events stored at these stream positions (not verified), by position; a position
        that holds none is left out. One statement per `LOOKUPS_PER_QUERY` positions."""
        conn = self._connection()
        found: dict[Position, StoredEvent] = {}
        for start in range(0, len(positions), LOOKUPS_PER_QUERY):
            chunk = positions[start : start + LOOKUPS_PER_QUERY]
            # Each row by its stream and version as the store gives them back.
            wanted: dict[tuple[object, int], Position]
            if isinstance(conn, sqlite3.Connection):
                wanted = {(stream.hex, version): (stream, version) for stream, version in chunk}
                values = ",".join(["(?, ?)"] * len(wanted))
                rows = conn.execute(
                    "SELECT e.originator_id, e.originator_version, e.topic, e.state"  # noqa: S608
                    f" FROM (VALUES {values}) AS p JOIN {self._sqlite_table()} AS e"
                    " ON e.originator_id = p.column1 AND e.originator_version = p.column2",
                    [part for stream, version in wanted for part in (stream, version)],
                ).fetchall()
            else:
                wanted = {position: position for position in chunk}
                query = sql.SQL(
                    "SELECT e.originator_id, e.originator_version, e.topic, e.state FROM {} e"
                    " JOIN unnest(%s::uuid[], %s::bigint[]) AS p (id, version)"
                    " ON e.originator_id = p.id AND e.originator_version = p.version"
                ).format(self._table())
                streams, versions = [s for s, _ in chunk], [v for _, v in chunk]
                rows = conn.execute(query, (streams, versions)).fetchall()
            for stream, version, topic, state in rows:
                position = wanted[stream, version]
                found[position] = stored_event(*position, topic, state)
        return found

    def last_versions(self, streams: Sequence[UUID]) -> dict[UUID, int]:
        """The last stored version of each of ``streams`` that has any (not verified)."""
        conn = self._connection()
        found: dict[UUID, int] = {}
        for start in range(0, len(streams), LOOKUPS_PER_QUERY):
            chunk = streams[start : start + LOOKUPS_PER_QUERY]
            if isinstance(conn, sqlite3.Connection):
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT originator_id, MAX(originator_version) FROM {self._sqlite_table()}"  # noqa: S608
                    f" WHERE originator_id IN ({marks}) GROUP BY originator_id",
                    [stream.hex for stream in chunk],
                ).fetchall()
                found.update((UUID(stream), int(version)) for stream, version in rows)
            else:
                query = sql.SQL(
                    "SELECT originator_id, MAX(originator_version) FROM {}"
                    " WHERE originator_id = ANY(%s) GROUP BY originator_id"
                ).format(self._table())
                for stream, version in conn.execute(query, (list(chunk),)).fetchall():
                    assert isinstance(stream, UUID)
                    found[stream] = int(str(version))
        return found

    def log(self, after: int = 0) -> Generator[list[LogRow]]:
        """Every stored event with a notification id after ``after``, in notification order,
        a page at a time, each row as stored (`LogRow`): one statement, one pass."""
        conn = self._connection()
        if isinstance(conn, sqlite3.Connection):
            cursor = conn.execute(
                "SELECT rowid, originator_id, originator_version, topic, state"  # noqa: S608
                f" FROM {self._sqlite_table()} WHERE rowid > ? ORDER BY rowid",
                (after,),
            )
            while rows := cursor.fetchmany(SCAN_PAGE):
                yield rows
            return
        query = sql.SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state FROM {}"
            " WHERE notification_id > %s ORDER BY notification_id"
        ).format(self._table())
        with conn.transaction(), _binary(conn.cursor(name="mace_pass", binary=True)) as cur:
            cur.execute(query, (after,))
            while rows := cur.fetchmany(SCAN_PAGE):
                yield rows

    @property
    def leaf_of(self) -> LeafOf:
        """The leaf of a `LogRow`'s stream, version, topic and state, as this store keeps them."""
        return _sqlite_leaf if isinstance(self.store, SQLiteStore) else _postgres_leaf

    def leaf_prefix(self, stored: object) -> bytes | None:
        """The `stream_leaf_prefix` of the leaves of a stream whose id a `LogRow` holds as
        ``stored``; None when its rows make no leaf (an id SQLite holds that is no UUID's)."""
        if isinstance(self.store, SQLiteStore):
            stream = _sqlite_stream(stored)
            return None if stream is None else stream_leaf_prefix(stream)
        assert isinstance(stored, bytes)  # PostgreSQL's uuid column, in binary
        return stream_leaf_prefix(stored)

    def stored_id(self, stream: UUID) -> str | bytes:
        """A stream id as a `LogRow` holds it."""
        return stream.hex if isinstance(self.store, SQLiteStore) else stream.bytes

    def stream_ids(self) -> Callable[[object], UUID]:
        """`LogRow` stream ids made UUIDs (`IntegrityFailure` for one that is none)."""
        return _StreamIds(UUID if isinstance(self.store, SQLiteStore) else _from_bytes)

    def leaves(self, after: int, skip: UUID) -> Generator[Leaf]:
        """The leaves of the events after notification id ``after``, in notification order,
        leaving out the stream ``skip`` (the checkpoints, which are no leaves) and any row
        without a stream id (as SQL's ``<>`` leaves it out)."""
        leaf_of, skipped = self.leaf_of, self.stored_id(skip)
        with closing(self.log(after)) as pages:
            for rows in pages:
                for notification_id, stream, version, topic, state in rows:
                    if stream is not None and stream != skipped:
                        yield Leaf(notification_id, leaf_of(stream, version, topic, state))

    def stream_events(self, stream: object) -> list[StoredEvent]:
        """Every stored event of one stream, by its id as a `LogRow` holds it, in version
        order."""
        conn = self._connection()
        if isinstance(conn, sqlite3.Connection):
            rows = conn.execute(
                "SELECT originator_id, originator_version, topic, state"  # noqa: S608
                f" FROM {self._sqlite_table()} WHERE originator_id = ?"
                " ORDER BY originator_version",
                (stream,),
            ).fetchall()
            ids = _StreamIds(UUID)
        else:
            assert isinstance(stream, bytes)
            query = sql.SQL(
                "SELECT originator_id, originator_version, topic, state FROM {}"
                " WHERE originator_id = %s ORDER BY originator_version"
            ).format(self._table())
            with _binary(conn.cursor(binary=True)) as cur:
                rows = cur.execute(query, (UUID(bytes=stream),)).fetchall()
            ids = _StreamIds(_from_bytes)
        return [
            stored_event(ids(stored), version, topic, state)
            for stored, version, topic, state in rows
        ]

    def log_nodes(self, spans: Mapping[int, tuple[int, int]]) -> dict[int, dict[int, bytes]]:
        """The stored Merkle nodes (``mace_log_nodes``) of each level in ``spans`` from its first
        index to its last, by level, then by index in index order (not verified): one
        statement of range reads of the table's key, where a look-up by pairs made one index
        probe a node."""
        found: dict[int, dict[int, bytes]] = {level: {} for level in spans}
        for level, index, hashed in self._log_node_rows("level, idx, hash", spans):
            found[int(level)][int(index)] = bytes(hashed)
        return found

    def log_node_hashes(self, spans: Mapping[int, tuple[int, int]]) -> list[Any]:
        """The hashes `log_nodes` finds, as stored, in its order (level, then index): all a
        check that they are the nodes expected needs, as (level, idx) is the table's key."""
        return [row[0] for row in self._log_node_rows("hash", spans)]

    def _log_node_rows(self, columns: str, spans: Mapping[int, tuple[int, int]]) -> list[Any]:
        conn = self._connection()
        ranges = [part for level, (first, last) in spans.items() for part in (level, first, last)]
        within = " OR ".join(["(level = ? AND idx >= ? AND idx <= ?)"] * len(spans))
        if isinstance(conn, sqlite3.Connection):
            return conn.execute(
                f'SELECT {columns} FROM "{LOG_NODES}" WHERE {within}'  # noqa: S608
                " ORDER BY level, idx",
                ranges,
            ).fetchall()
        query = sql.SQL("SELECT {} FROM {} WHERE {} ORDER BY level, idx").format(
            sql.SQL(columns), self._table(LOG_NODES), sql.SQL(within.replace("?", "%s"))
        )
        return conn.execute(query, ranges).fetchall()

    def count_through(self, through: int, skip: UUID) -> int:
        """How many events of streams other than ``skip`` have a notification id up to
        ``through``."""
        return self._count("<=", through, skip)

    def _count(self, compared: str, position: int, skip: UUID) -> int:
        conn = self._connection()
        if isinstance(conn, sqlite3.Connection):
            row = conn.execute(
                f"SELECT count(*) FROM {self._sqlite_table()}"  # noqa: S608
                f" WHERE rowid {compared} ? AND originator_id <> ?",
                (position, skip.hex),
            ).fetchone()
        else:
            query = sql.SQL(
                "SELECT count(*) FROM {} WHERE notification_id {} %s AND originator_id <> %s"
            ).format(self._table(), sql.SQL(compared))
            row = conn.execute(query, (position, skip)).fetchone()
        assert row is not None
        return int(row[0])

    def notification_ids(self, stream: UUID, after_version: int, limit: int) -> list[int]:
        """The notification ids of the stream's events after ``after_version``, in version
        order, at most ``limit``."""
        conn = self._connection()
        if isinstance(conn, sqlite3.Connection):
            rows = conn.execute(
                f"SELECT rowid FROM {self._sqlite_table()}"  # noqa: S608
                " WHERE originator_id = ? AND originator_version > ?"
                " ORDER BY originator_version LIMIT ?",
                (stream.hex, after_version, limit),
            ).fetchall()
        else:
            query = sql.SQL(
                "SELECT notification_id FROM {} WHERE originator_id = %s"
                " AND originator_version > %s ORDER BY originator_version LIMIT %s"
            ).format(self._table())
            rows = conn.execute(query, (stream, after_version, limit)).fetchall()
        return [int(row[0]) for row in rows]

    def located(self, notification_id: int) -> tuple[UUID, int] | None:
        """The stream and version of the event with this notification id, if there is one."""
        conn = self._connection()
        if isinstance(conn, sqlite3.Connection):
            row = conn.execute(
                "SELECT originator_id, originator_version"  # noqa: S608
                f" FROM {self._sqlite_table()} WHERE rowid = ?",
                (notification_id,),
            ).fetchone()
        else:
            query = sql.SQL(
                "SELECT originator_id, originator_version FROM {} WHERE notification_id = %s"
            ).format(self._table())
            row = conn.execute(query, (notification_id,)).fetchone()
        if row is None:
            return None
        stream, version = row
        return (stream if isinstance(stream, UUID) else UUID(str(stream))), int(version)
