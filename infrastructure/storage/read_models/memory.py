"""Read models held in memory: a rebuild to compare with, written nowhere.

`ReadModels.compare` projects a read store's log into this view and compares its digests with
the views the read store holds: the read store is never written to, and nothing else is either.
It keeps what the tables keep (rows by view and key, how far the log was applied), the same way
(`ReadModelView`).
"""

from __future__ import annotations

from collections.abc import Sequence

from eventsourcing.persistence import Tracking

from infrastructure.storage.read_models.tables import Changes, Row


class MemoryReadModelView:
    def __init__(self) -> None:
        self._rows: dict[str, dict[str, Row]] = {}
        self._position: int | None = None

    def table_names(self) -> tuple[str, ...]:
        return ()

    def create_table(self) -> None:
        """Nothing to make: the rows live in this object."""

    def max_tracking_id(self, application_name: str) -> int | None:
        return self._position

    def row(self, view: str, key: str) -> Row | None:
        return self._rows.get(view, {}).get(key)

    def rows(self, view: str) -> list[tuple[str, Row]]:
        return sorted(self._rows.get(view, {}).items())

    def rows_at(self, view: str, keys: Sequence[str]) -> dict[str, Row]:
        held = self._rows.get(view, {})
        return {key: held[key] for key in keys if key in held}

    def apply(self, changes: Changes, tracking: Tracking) -> None:
        for (view, key), row in changes.items():
            if row is None:
                self._rows.get(view, {}).pop(key, None)
            else:
                self._rows.setdefault(view, {})[key] = row
        self._position = tracking.notification_id

    def reset(self, application_name: str) -> None:
        self._rows.clear()
        self._position = None
