"""What a process did in the events table: rows read, rows written, and the commits that wrote
them. `mace bench --compare-raw` does the same I/O again with nothing of the ledger around it,
on the same store, and compares the two (`infrastructure.tooling.bench_raw`).

Counting is a few integer additions per statement, so it is always on. Threads of one process
(the HTTP service) may lose an addition now and then: the tally is a measure, not a ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Notification, StoredEvent


@dataclass(slots=True)
class IoTally:
    rows_read: int = 0
    rows_written: int = 0
    commits: int = 0

    def since(self, before: IoTally) -> IoTally:
        """What was done after ``before`` (an earlier `snapshot` of this tally)."""
        return IoTally(
            self.rows_read - before.rows_read,
            self.rows_written - before.rows_written,
            self.commits - before.commits,
        )

    def snapshot(self) -> IoTally:
        return replace(self)


class TalliedIo:
    """A recorder mixin (first in the bases) that tallies every read of stored events and
    every insert of them into ``io``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.io = IoTally()

    def select_events(self, originator_id: UUID | str, **kwargs: Any) -> Sequence[StoredEvent]:
        events: Sequence[StoredEvent] = super().select_events(  # type: ignore[misc]
            originator_id, **kwargs
        )
        self.io.rows_read += len(events)
        return events

    def select_streams(self, streams: Sequence[UUID]) -> dict[UUID, Sequence[StoredEvent]]:
        found: dict[UUID, Sequence[StoredEvent]] = super().select_streams(  # type: ignore[misc]
            streams
        )
        # A stream read again alone after a shortfall was counted by `select_events` too: only
        # on the failure path, so the tally does not tell them apart.
        self.io.rows_read += sum(map(len, found.values()))
        return found

    def select_notifications(self, *args: Any, **kwargs: Any) -> Sequence[Notification]:
        page: Sequence[Notification] = super().select_notifications(  # type: ignore[misc]
            *args, **kwargs
        )
        self.io.rows_read += len(page)
        return page

    def insert_events_with(self, stored_events: Sequence[StoredEvent], also: Any) -> Sequence[int]:
        ids: Sequence[int] = super().insert_events_with(  # type: ignore[misc]
            stored_events, also
        )
        self.io.rows_written += len(stored_events)
        self.io.commits += 1
        return ids
