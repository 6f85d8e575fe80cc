"""The SQLite recorder the ledger stores through: eventsourcing's, with writes beside a save,
and every read of a stream held against its checkpointed head (`head_check`).

A checkpoint's index rows (`checkpoint_tables`) must be committed with the checkpoint event or
not at all; `insert_events_with` makes them in the save's own transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder

from infrastructure.storage.checkpoint_tables import AlsoWrite
from infrastructure.storage.head_check import HeadCheckedReads


class LedgerSQLiteRecorder(HeadCheckedReads, SQLiteApplicationRecorder):
    def insert_events_with(
        self, stored_events: Sequence[StoredEvent], also: AlsoWrite | None
    ) -> Sequence[int]:
        with self.datastore.transaction(commit=True) as cursor:
            ids = self._insert_events(cursor, stored_events) or []
            if also is not None:
                also(cursor)
            return ids
