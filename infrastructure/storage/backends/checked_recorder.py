"""The PostgreSQL recorder, failing closed on a stored row whose ``state`` is NULL.

Reads verify every row (``signed_record.verify_record``), and that check refuses a row without a
topic or state as an integrity failure. On PostgreSQL a NULL state never gets there:
eventsourcing's recorder converts each row's state with ``bytes()`` as it reads a page, and raises
a bare TypeError. This recorder turns that into the integrity failure it is, naming the first
such row (found with one more query, on the failure path only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import InterfaceError, Notification, OperationalError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder
from eventsourcing.utils import retry
from psycopg.sql import SQL, Composed, Identifier

from domain.errors import IntegrityFailure
from infrastructure.storage.records.signed_record import NO_STATE


class CheckedPostgresRecorder(PostgresApplicationRecorder):
    def select_events(self, originator_id: UUID | str, **kwargs: Any) -> Sequence[StoredEvent]:
        try:
            events: Sequence[StoredEvent] = super().select_events(originator_id, **kwargs)
        except TypeError:
            row = self._first_without_state(SQL("originator_id = %s"), originator_id)
            if row is None:
                raise
            raise IntegrityFailure(*row, NO_STATE) from None
        return events

    def select_notifications(
        self, start: int | None, limit: int, *args: Any, **kwargs: Any
    ) -> Sequence[Notification]:
        try:
            page: Sequence[Notification] = super().select_notifications(
                start, limit, *args, **kwargs
            )
        except TypeError:
            row = self._first_without_state(SQL("notification_id >= %s"), start or 0)
            if row is None:
                raise
            raise IntegrityFailure(*row, NO_STATE) from None
        return page

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def _select_streams(self, streams: Sequence[UUID]) -> dict[UUID, list[StoredEvent]]:
        """The stored events of ``streams`` that have any, in one query (`HeadCheckedReads`)."""
        query = SQL(
            "SELECT originator_id, originator_version, topic, state FROM {schema}.{table}"
            " WHERE originator_id = ANY(%s) ORDER BY originator_id, originator_version"
        ).format(schema=Identifier(self.datastore.schema), table=Identifier(self.events_table_name))
        found: dict[UUID, list[StoredEvent]] = {}
        with self.datastore.get_connection() as conn, conn.cursor() as cursor:
            cursor.execute(query, (list(streams),))
            for row in cursor.fetchall():
                stream, version, state = (
                    row["originator_id"],
                    row["originator_version"],
                    row["state"],
                )
                if state is None:
                    raise IntegrityFailure(stream, version, NO_STATE)
                found.setdefault(stream, []).append(
                    StoredEvent(stream, version, row["topic"], bytes(state))
                )
        return found

    def _first_without_state(self, where: SQL, value: object) -> tuple[UUID, int] | None:
        """The stream and version of the first row ``where`` selects whose state is NULL."""
        query = Composed(
            [
                SQL("SELECT originator_id, originator_version FROM {schema}.{table} WHERE ").format(
                    schema=Identifier(self.datastore.schema),
                    table=Identifier(self.events_table_name),
                ),
                where,
                SQL(" AND state IS NULL ORDER BY notification_id LIMIT 1"),
            ]
        )
        with self.datastore.get_connection() as conn, conn.cursor() as cursor:
            cursor.execute(query, (value,))
            row = cursor.fetchone()
        return None if row is None else (row["originator_id"], row["originator_version"])
