"""The SQLite recorder the ledger stores through: eventsourcing's, with writes beside a save,
and every read of a stream held against its checkpointed head (`head_check`).

A checkpoint's index rows (`checkpoint_tables`) must be committed with the checkpoint event or
not at all; `insert_events_with` makes them in the save's own transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder

from infrastructure.storage.backends.io_tally import TalliedIo
from infrastructure.storage.backends.stream_reads import Unmoved, conflict_if_moved
from infrastructure.storage.checkpoints.head_check import STREAMS_PER_QUERY, HeadCheckedReads
from infrastructure.storage.checkpoints.tables import AlsoWrite


class IndexedSQLiteRecorder(HeadCheckedReads, SQLiteApplicationRecorder):
    def insert_events(
        self, stored_events: Sequence[StoredEvent], *, also: AlsoWrite | None = None, **_: Any
    ) -> Sequence[int] | None:
        # Every save goes through the one insert (eventsourcing's does the same without ``also``).
        return self.insert_events_with(stored_events, also)

    def insert_events_with(
        self, stored_events: Sequence[StoredEvent], also: AlsoWrite | None
    ) -> Sequence[int]:
        with self.datastore.transaction(commit=True) as cursor:
            ids = self._insert_events(cursor, stored_events) or []
            if also is not None:
                also(cursor)
            return ids

    def _select_streams(self, streams: Sequence[UUID]) -> dict[UUID, list[StoredEvent]]:
        """The stored events of ``streams`` that have any, in one query (`HeadCheckedReads`)."""
        # The table's name is eventsourcing's setting and the marks are "?": no value is inlined.
        marks = ",".join("?" * len(streams))
        statement = (
            "SELECT originator_id, originator_version, topic, state FROM"  # noqa: S608
            f" {self.events_table_name} WHERE originator_id IN ({marks})"
            " ORDER BY originator_id, originator_version"
        )
        found: dict[UUID, list[StoredEvent]] = {}
        with self.datastore.transaction(commit=False) as cursor:
            cursor.execute(statement, [stream.hex for stream in streams])
            for row in cursor.fetchall():
                stream = UUID(row["originator_id"])
                found.setdefault(stream, []).append(
                    StoredEvent(stream, row["originator_version"], row["topic"], row["state"])
                )
        return found

    def unmoved(self, read: Mapping[UUID, int]) -> Unmoved:
        """A save's check that each stream of ``read`` is still at the version given (`unmoved`):
        made after the save's inserts, when SQLite has given the save its one write lock."""

        def check(cursor: Any) -> None:
            conflict_if_moved(read, self._last_versions(cursor, list(read)))

        return Unmoved(read, check)

    def last_versions(self, streams: Sequence[UUID]) -> dict[UUID, int]:
        """The last stored version of each of ``streams`` that has any, in one statement for
        every `STREAMS_PER_QUERY` (SQLite bounds a statement's parameters)."""
        found: dict[UUID, int] = {}
        # Each statement reads one snapshot of the file alone: no BEGIN and ROLLBACK around it.
        with self.datastore.get_connection(commit=False) as conn:
            cursor = conn.cursor()
            for start in range(0, len(streams), STREAMS_PER_QUERY):
                chunk = streams[start : start + STREAMS_PER_QUERY]
                found.update(self._last_versions(cursor, chunk))
        return found

    def _last_versions(self, cursor: Any, streams: Sequence[UUID]) -> dict[UUID, int]:
        marks = ",".join("?" * len(streams))
        statement = (
            "SELECT originator_id, MAX(originator_version) FROM"  # noqa: S608
            f" {self.events_table_name} WHERE originator_id IN ({marks}) GROUP BY originator_id"
        )
        cursor.execute(statement, [stream.hex for stream in streams])
        return {UUID(row[0]): int(row[1]) for row in cursor.fetchall()}

    def stream_positions(self, streams: Sequence[UUID]) -> dict[UUID, dict[int, int]]:
        """For each of ``streams``, its versions' notification ids (SQLite's rowid)."""
        marks = ",".join("?" * len(streams))
        statement = (
            "SELECT originator_id, originator_version, rowid FROM"  # noqa: S608
            f" {self.events_table_name} WHERE originator_id IN ({marks})"
        )
        found: dict[UUID, dict[int, int]] = {stream: {} for stream in streams}
        with self.datastore.transaction(commit=False) as cursor:
            cursor.execute(statement, [stream.hex for stream in streams])
            for row in cursor.fetchall():
                found[UUID(row[0])][int(row[1])] = int(row[2])
        return found


class LedgerSQLiteRecorder(TalliedIo, IndexedSQLiteRecorder):
    """The ledger's SQLite recorder: the rows it reads and writes tallied (`io_tally`)."""
