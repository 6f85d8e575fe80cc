"""The PostgreSQL recorder the ledger stores through: eventsourcing's, with saves that commit side
by side, readers that never pass an id still in flight, and large writes in chunks.

**Writers in parallel** (docs/ordering.md has the argument in full). eventsourcing makes every save
take ``LOCK TABLE ... IN EXCLUSIVE MODE`` and send ``NOTIFY`` (which takes a lock of its own at
commit), both held through the commit's flush: saves queued behind one flush each. Here a save
takes instead, first, a shared transaction-scoped advisory lock on `WRITERS_LOCK`, before its
insert draws notification ids: shared locks do not conflict, so saves run and flush together.
Their ids are drawn at insert, not at commit, so a reader may see id 11 committed while 10 is in
flight; `settled_head` is how far a reader may go: it reads how far the id sequence has drawn
(L), then takes and lets go `WRITERS_LOCK` exclusively (a barrier). Every id up to L was drawn
by a save holding the shared lock at that moment, so once the barrier is granted each of them is
committed or rolled back for good. Reads in log order (`select_notifications`,
`max_notification_id`) stop there, in this one place. A save of many streams (`STREAM_LOCKS`)
takes `WRITERS_LOCK` exclusively and runs alone, as every save did under the table lock.

A save also locks the streams it writes (exclusive) and the streams its `Unmoved` check read
(shared), keys sorted, in one statement after `WRITERS_LOCK`: a save that read a stream and one
that writes it take turns, so the check stays final (`stream_reads`).

**Large saves.** eventsourcing 9.5 sends a save as one ``INSERT ... SELECT FROM unnest(array)``
statement in psycopg's pipeline mode. A save of a few MB (a run of thousands of events) never
finishes there: the client stops sending the statement while it waits for results that the server
cannot send before it has read the statement (psycopg issue 685). This recorder sends a save
larger than one chunk (`CHUNK_ROWS` rows or about `CHUNK_BYTES` bytes) without pipeline mode, cut
into inserts of at most one chunk each, so no single statement grows with the save; a save of one
chunk goes in pipeline mode, ``BEGIN`` to ``COMMIT`` in one round trip. Either is one transaction:
a save stays atomic.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final
from uuid import UUID

from eventsourcing.persistence import InterfaceError, Notification, OperationalError, StoredEvent
from eventsourcing.postgres import PostgresAggregateRecorder
from eventsourcing.utils import retry
from psycopg.errors import LockNotAvailable
from psycopg.sql import SQL, Identifier

from infrastructure.storage.backends.checked_recorder import CheckedPostgresRecorder
from infrastructure.storage.backends.io_tally import TalliedIo
from infrastructure.storage.backends.stream_reads import Unmoved, conflict_if_moved
from infrastructure.storage.checkpoints.head_check import HeadCheckedReads
from infrastructure.storage.checkpoints.tables import AlsoWrite

CHUNK_ROWS: Final = 1000
CHUNK_BYTES: Final = 1 << 20
"""An insert statement carries at most this many rows, and stops adding rows past this many
bytes of stored state (a single larger event goes alone)."""
WRITERS_LOCK: Final = 0x6D6163655F6C6F67
"""The advisory lock key (``mace_log`` in ASCII) every save holds shared while it draws
notification ids and commits, and a reader takes exclusively for an instant (`settled_head`)."""
STREAM_LOCKS: Final = 64
"""A save locks each of its streams up to this many; one of more takes `WRITERS_LOCK`
exclusively instead (a bundle's import): each lock is a slot of the server's shared lock table,
which holds ``max_locks_per_transaction`` (64) per connection."""


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
    """Saves side by side and in chunks, reads in log order up to the settled horizon (see
    above); reads as `CheckedPostgresRecorder` does (a NULL state is an integrity failure),
    each read of a stream held against its checkpointed head (`head_check`)."""

    _settled = 0
    """The highest settled id this process has seen (`settled_head`): settled for good."""
    barrier_timeout: float = 5.0
    """Seconds a reader's barrier waits for the saves in flight before it answers the last
    settled head instead (`settled_head`)."""

    def insert_events(
        self, stored_events: Sequence[StoredEvent], *, also: AlsoWrite | None = None, **_: Any
    ) -> Sequence[int] | None:
        ids: Sequence[int] = self.insert_events_with(stored_events, also)
        return ids

    def unmoved(self, read: Mapping[UUID, int]) -> Unmoved:
        """A save's check that each stream of ``read`` is still at the version given (`unmoved`):
        made after the save's inserts, under the shared locks on them the save took first."""

        def check(cursor: Any) -> None:
            conflict_if_moved(read, self._last_versions(cursor, list(read)))

        return Unmoved(read, check)

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
        # The database-function path takes none of the locks below: never taken.
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
            self._take_locks(curs, stored_events, also)
            for chunk in insert_chunks(stored_events):
                # The plain INSERT: PostgresApplicationRecorder's would lock the table and NOTIFY.
                PostgresAggregateRecorder._insert_stored_events(self, curs, chunk)
                ids = self._fetch_ids_after_insert_events(curs, chunk)
                notification_ids.extend(ids or ())
            if also is not None:
                also(curs)
        return notification_ids

    def _insert_pipelined(self, stored_events: Sequence[StoredEvent]) -> list[int]:
        """A save of one chunk: ``BEGIN``, the save's locks (`_take_locks`), the insert and
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
                    ending.execute(_BEGIN)
                    self._take_locks(ending, stored_events, None)
                    PostgresAggregateRecorder._insert_stored_events(self, curs, stored_events)
                    ending.execute(_COMMIT)
            except Exception:
                conn.rollback()
                raise
            return list(self._fetch_ids_after_insert_events(curs, stored_events) or ())

    def _take_locks(self, curs: Any, stored_events: Sequence[StoredEvent], also: object) -> None:
        """The save's locks, before its insert draws a notification id: `WRITERS_LOCK` shared,
        then its streams' (`stream_locks`); more than `STREAM_LOCKS` streams: `WRITERS_LOCK`
        exclusively, and no other save runs meanwhile. eventsourcing's ``SET LOCAL
        lock_timeout`` (``POSTGRES_LOCK_TIMEOUT``) bounds the waits as it bounded the table
        lock's."""
        read = also.read if isinstance(also, Unmoved) else {}
        high, low, shared = stream_locks((e.originator_id for e in stored_events), read)
        curs.execute(self.lock_table_statements[0], prepare=True)
        if len(high) > STREAM_LOCKS:
            curs.execute(_WRITE_ALONE, (WRITERS_LOCK,), prepare=True)
            return
        curs.execute(_WRITE_BESIDE, (WRITERS_LOCK,), prepare=True)
        curs.execute(_LOCK_STREAMS, (high, low, shared), prepare=True)

    # Reading in log order

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def settled_head(self) -> int:
        """The highest notification id committed at or below the settled horizon (0: none):
        every id up to it is committed or rolled back for good, so a reader that stops there
        and later goes on from there skips nothing and reads nothing twice.

        How far the sequence has drawn is read first, then `WRITERS_LOCK` is taken exclusively
        and let go (its transaction is the statement): every save that drew an id up to there
        held the lock shared when it was read, or had ended, so all have ended once the barrier
        is granted, and the next statement's snapshot sees each as it ended. Saves that start
        meanwhile queue behind the barrier for its instant only. The answer is a committed id,
        not the drawn one: ids past the last commit may be drawn again after a server crash (a
        sequence's advance reaches the disk with the next commit). It is kept (`_settled`), so
        that pages below it need no barrier.

        A save that stays in flight longer than `barrier_timeout` (its client cut off from the
        server, which ends it only once the connection is found dead) leaves the horizon where
        it was: the reader answers the last head settled, late but never past an id in flight,
        and the saves queued behind the barrier go on."""
        table = SQL("{schema}.{table}").format(
            schema=Identifier(self.datastore.schema), table=Identifier(self.events_table_name)
        )
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(_DRAWN, (table.as_string(conn),), prepare=True)
            row = curs.fetchone()
            drawn = 0 if row is None or row["drawn"] is None else int(row["drawn"])
            try:
                curs.execute(_BARRIER, (WRITERS_LOCK, f"{self.barrier_timeout}s"), prepare=True)
            except LockNotAvailable:
                return self._settled
            curs.execute(_SETTLED.format(table=table), (drawn,), prepare=True)
            row = curs.fetchone()
        head = 0 if row is None or row["head"] is None else int(row["head"])
        self._settled = max(self._settled, head)
        return head

    def max_notification_id(self) -> int | None:
        return self.settled_head() or None

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        """eventsourcing's page of the log, never past the settled horizon (`settled_head`): a
        page that reaches beyond the one already known settles it again first."""
        settled = self._settled
        if stop is None or stop > settled:
            settled = self.settled_head()
        stop = settled if stop is None else min(stop, settled)
        page: Sequence[Notification] = super().select_notifications(
            start, limit, stop, topics, inclusive_of_start=inclusive_of_start
        )
        return page


def stream_locks(
    written: Iterable[UUID | str], read: Iterable[UUID]
) -> tuple[list[int], list[int], list[bool]]:
    """A save's stream locks as `_LOCK_STREAMS` takes them: each stream's advisory key (the
    two-integer form, apart from `WRITERS_LOCK`'s one-integer form), and whether it is shared
    (read only) or exclusive (written), sorted by key: every save takes its locks in one global
    order, so no two saves wait for each other in a cycle. Streams whose keys collide share a
    lock: they take turns, which is never wrong."""
    keys: dict[tuple[int, int], bool] = dict.fromkeys(map(_stream_key, read), True)
    keys.update(dict.fromkeys(map(_stream_key, written), False))
    ordered = sorted(keys.items())
    return (
        [high for (high, _), _ in ordered],
        [low for (_, low), _ in ordered],
        [shared for _, shared in ordered],
    )


def _stream_key(stream: UUID | str) -> tuple[int, int]:
    raw = (stream if isinstance(stream, UUID) else UUID(str(stream))).bytes
    return (
        int.from_bytes(raw[:4], "big", signed=True),
        int.from_bytes(raw[4:8], "big", signed=True),
    )


_BEGIN: Final = SQL("BEGIN")
_COMMIT: Final = SQL("COMMIT")
_WRITE_BESIDE: Final = SQL("SELECT pg_catalog.pg_advisory_xact_lock_shared(%s)")
_WRITE_ALONE: Final = SQL("SELECT pg_catalog.pg_advisory_xact_lock(%s)")
# The function in FROM runs first: the lock's wait is bounded by the timeout set for this
# statement's transaction only.
_BARRIER: Final = SQL(
    "SELECT pg_catalog.pg_advisory_xact_lock(%s)"
    " FROM pg_catalog.set_config('lock_timeout', %s, true)"
)
# The rows of a function scan come in array order, and each row's lock is taken as it comes.
_LOCK_STREAMS: Final = SQL(
    "SELECT count(CASE WHEN s.shared"
    " THEN pg_catalog.pg_advisory_xact_lock_shared(s.high, s.low)"
    " ELSE pg_catalog.pg_advisory_xact_lock(s.high, s.low) END)"
    " FROM unnest(%s::int4[], %s::int4[], %s::bool[]) AS s(high, low, shared)"
)
_DRAWN: Final = SQL(
    "SELECT pg_catalog.pg_sequence_last_value("
    "pg_catalog.pg_get_serial_sequence(%s, 'notification_id')::regclass) AS drawn"
)
_SETTLED: Final = SQL(
    "SELECT MAX(notification_id) AS head FROM {table} WHERE notification_id <= %s"
)


def _size(stored_events: Sequence[StoredEvent]) -> int:
    return sum(len(stored.state) for stored in stored_events)


class LedgerPostgresRecorder(TalliedIo, ChunkedPostgresRecorder):
    """The ledger's PostgreSQL recorder: the rows it reads and writes tallied (`io_tally`)."""
