"""The PostgreSQL recorder the ledger stores through: eventsourcing's, with large writes in chunks.

eventsourcing 9.5 sends a save as one ``INSERT ... SELECT FROM unnest(array)`` statement in
psycopg's pipeline mode. A save of a few MB (a run of thousands of events) never finishes there:
the client stops sending the statement while it waits for results that the server cannot send
before it has read the statement (psycopg issue 685), and the transaction keeps the events
table's EXCLUSIVE lock, so every other writer waits too, until the process is killed.

This recorder sends a save larger than one chunk (`CHUNK_ROWS` rows or about `CHUNK_BYTES` bytes)
without pipeline mode, cut into inserts of at most one chunk each, so no single statement grows
with the save; a save of one chunk goes in pipeline mode, as eventsourcing sends it. Either is
one transaction that first takes eventsourcing's ``LOCK TABLE ... IN EXCLUSIVE MODE`` and sends
its ``NOTIFY``: a save stays atomic, and notification order stays commit order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final
from uuid import UUID

from eventsourcing.persistence import InterfaceError, OperationalError, StoredEvent
from eventsourcing.postgres import PostgresAggregateRecorder
from eventsourcing.utils import retry
from psycopg.sql import SQL, Identifier

from infrastructure.storage.backends.checked_recorder import CheckedPostgresRecorder
from infrastructure.storage.backends.io_tally import TalliedIo
from infrastructure.storage.backends.stream_reads import conflict_if_moved
from infrastructure.storage.checkpoints.head_check import HeadCheckedReads
from infrastructure.storage.checkpoints.tables import AlsoWrite

CHUNK_ROWS: Final = 1000
CHUNK_BYTES: Final = 1 << 20
"""An insert statement carries at most this many rows, and stops adding rows past this many
bytes of stored state (a single larger event goes alone)."""


def insert_chunks(
    stored_events: Sequence[StoredEvent], rows: int = CHUNK_ROWS, size: int = CHUNK_BYTES
) -> Iterator[Sequence[StoredEvent]]:
    """The events in order, in consecutive chunks of at most ``rows`` rows and ~``size`` bytes."""
    start, held = 0, 0
    for end, stored in enumerate(stored_events):
        if end > start and (end - start == rows or held + len(stored.state) > size):
            yield stored_events[start:end]
            start, held = end, 0
        held += len(stored.state)
    if start < len(stored_events):
        yield stored_events[start:]


class ChunkedPostgresRecorder(HeadCheckedReads, CheckedPostgresRecorder):
    """Reads as `CheckedPostgresRecorder` does (a NULL state is an integrity failure), each read
    of a stream held against its checkpointed head (`head_check`)."""

    def insert_events(
        self, stored_events: Sequence[StoredEvent], *, also: AlsoWrite | None = None, **_: Any
    ) -> Sequence[int] | None:
        ids: Sequence[int] = self.insert_events_with(stored_events, also)
        return ids

    def unmoved(self, read: Mapping[UUID, int]) -> AlsoWrite:
        """A save's check that each stream of ``read`` is still at the version given (`unmoved`):
        made after the save's inserts, under the table lock the save took first."""

        def check(cursor: Any) -> None:
            conflict_if_moved(read, self._last_versions(cursor, list(read)))

        return check

    def last_versions(self, streams: Sequence[UUID]) -> dict[UUID, int]:
        """The last stored version of each of ``streams`` that has any, in one statement."""
        with self.datastore.get_connection() as conn, conn.cursor() as cursor:
            return self._last_versions(cursor, streams)

    def _last_versions(self, cursor: Any, streams: Sequence[UUID]) -> dict[UUID, int]:
        query = SQL(
            "SELECT originator_id, MAX(originator_version) AS version FROM {schema}.{table}"
            " WHERE originator_id = ANY(%s) GROUP BY originator_id"
        ).format(schema=Identifier(self.datastore.schema), table=Identifier(self.events_table_name))
        cursor.execute(query, (list(streams),))
        return {row["originator_id"]: int(row["version"]) for row in cursor.fetchall()}

    def stream_positions(self, streams: Sequence[UUID]) -> dict[UUID, dict[int, int]]:
        """For each of ``streams``, its versions' notification ids."""
        query = SQL(
            "SELECT originator_id, originator_version, notification_id FROM {schema}.{table}"
            " WHERE originator_id = ANY(%s)"
        ).format(schema=Identifier(self.datastore.schema), table=Identifier(self.events_table_name))
        found: dict[UUID, dict[int, int]] = {stream: {} for stream in streams}
        with self.datastore.get_connection() as conn, conn.cursor() as cursor:
            cursor.execute(query, (list(streams),))
            for row in cursor.fetchall():
                found[row["originator_id"]][row["originator_version"]] = row["notification_id"]
        return found

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events_with(
        self, stored_events: Sequence[StoredEvent], also: AlsoWrite | None
    ) -> Sequence[int]:
        """Insert the events, and make ``also``'s writes in the same transaction (a checkpoint's
        index rows): all are committed or none."""
        # The database-function path gives up commit-ordered notification ids: never taken.
        assert not self.datastore.enable_db_functions
        notification_ids: list[int] = []
        if not stored_events:
            return notification_ids
        if (
            also is None
            and len(stored_events) <= CHUNK_ROWS
            and _size(stored_events) <= CHUNK_BYTES
        ):
            return self._insert_pipelined(stored_events)
        with (
            self.datastore.get_connection() as conn,
            conn.transaction(),
            conn.cursor() as curs,
        ):
            self._lock_table(curs)
            self._notify_channel(curs)
            for chunk in insert_chunks(stored_events):
                # The plain INSERT: PostgresApplicationRecorder's would lock and NOTIFY again.
                PostgresAggregateRecorder._insert_stored_events(self, curs, chunk)
                ids = self._fetch_ids_after_insert_events(curs, chunk)
                notification_ids.extend(ids or ())
            if also is not None:
                also(curs)
        return notification_ids

    def _insert_pipelined(self, stored_events: Sequence[StoredEvent]) -> list[int]:
        """A save of one chunk: ``BEGIN``, eventsourcing's lock, ``NOTIFY`` and insert, and
        ``COMMIT``, sent together in psycopg's pipeline mode: one round trip for the whole
        transaction. The statement is small, so the client never stalls sending it (psycopg
        issue 685). After a failure the server skips the rest, ``COMMIT`` included, and the
        transaction is rolled back before the error is raised."""
        with (
            self.datastore.get_connection() as conn,
            conn.cursor() as curs,
            conn.cursor() as ending,
        ):
            try:
                with conn.pipeline():
                    curs.execute(_BEGIN)
                    self._lock_table(curs)
                    self._notify_channel(curs)
                    PostgresAggregateRecorder._insert_stored_events(self, curs, stored_events)
                    ending.execute(_COMMIT)
            except Exception:
                conn.rollback()
                raise
            return list(self._fetch_ids_after_insert_events(curs, stored_events) or ())


_BEGIN: Final = SQL("BEGIN")
_COMMIT: Final = SQL("COMMIT")


def _size(stored_events: Sequence[StoredEvent]) -> int:
    return sum(len(stored.state) for stored in stored_events)


class LedgerPostgresRecorder(TalliedIo, ChunkedPostgresRecorder):
    """The ledger's PostgreSQL recorder: the rows it reads and writes tallied (`io_tally`)."""
