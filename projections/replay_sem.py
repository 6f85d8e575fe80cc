"""SEM as a job saw it, rebuilt from the signed SEM log for that job's replay.

The memory is the job's own tenant's (the tenant its JobStarted records). It changes after a job
ran (later jobs write the same keys), so a replay must not read it as it stands now. Each SEM
write is stamped by its key's deterministic clock, and a job records the ``last_updated`` of
every entry it read or wrote; that stamp names the entry's version exactly.
For each key the job touched, the view folds the key's own events up to the version the job met
first (the version it read, or the one before its first write). A key the job never touched is
a miss, as is a stamp that no version of the key carries: either way the replay's reads differ
from the record, and the comparison says where.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from domain.determinism import iso_text
from domain.events import RunEvent, SemRead, SemWrite
from domain.sem import SemEntry


class SemHistory(Protocol):
    def sem_events(self, tenant: str, key: str) -> Sequence[SemEntry.Event]:
        """Every event of the tenant's SEM entry under the key, verified, in version order (none:
        empty)."""


class MemoryAsRecorded:
    """A `SemSource` answering with each key's entry of the job's tenant as the job first met it."""

    def __init__(self, history: SemHistory, tenant: str, events: Iterable[RunEvent]) -> None:
        self._history = history
        self.tenant = tenant
        self._first_met: dict[str, tuple[str | None, bool]] = {}
        for event in events:
            if isinstance(event, SemRead):
                self._first_met.setdefault(event.key, (event.last_updated, False))
            elif isinstance(event, SemWrite) and event.status == "written":
                self._first_met.setdefault(event.key, (event.last_updated, True))

    def entry(self, key: str) -> SemEntry | None:
        met = self._first_met.get(key)
        if met is None or met[0] is None:
            return None
        stamp, before_it = met
        events = self._history.sem_events(self.tenant, key)
        for position, stored in enumerate(events):
            if iso_text(stored.timestamp) == stamp:
                return _fold(events[: position if before_it else position + 1])
        return None


def _fold(events: Sequence[SemEntry.Event]) -> SemEntry | None:
    entry: SemEntry | None = None
    for stored in events:
        entry = stored.mutate(entry)
    return entry
