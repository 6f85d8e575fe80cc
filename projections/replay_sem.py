"""SEM as a job saw it, rebuilt from the signed SEM log for that job's replay.

The memory is the job's own tenant's (the tenant its JobStarted records). It changes after a job
ran (later jobs write the same keys), so a replay must not read it as it stands now. Each SEM
write is stamped by its key's deterministic clock, and a job records the ``last_updated`` of
every entry it read or wrote; that stamp names the entry's version exactly.
For each key the job touched, the view folds the key's own events up to the version the job met
first (the version it read, or the one before its first write). A key the job never touched is
a miss: the replay's reads differ from the record, and the comparison says where. A stamp the
job met that no version of the key carries is a version deleted from the ledger (the stream
stays contiguous when its newest versions go): INTEGRITY_FAILURE, never a divergence.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from domain.determinism import iso_text
from domain.errors import ErrorCode, MaceError
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
        for key, stamp, written in versions_met(events):
            self._first_met.setdefault(key, (stamp, written))

    def entry(self, key: str) -> SemEntry | None:
        stamp, before_it = self._first_met.get(key, (None, False))
        if stamp is None:
            return None
        events = self._history.sem_events(self.tenant, key)
        position = version_stamped(events, stamp)
        if position is None:
            raise MaceError(ErrorCode.INTEGRITY_FAILURE, missing_version(key, stamp))
        return _fold(events[: position if before_it else position + 1])


def versions_met(events: Iterable[RunEvent]) -> list[tuple[str, str | None, bool]]:
    """Each SEM version a job read or wrote, in stream order: ``(key, stamp, written)``; the
    stamp is None for a read of a key that had no entry."""
    met: list[tuple[str, str | None, bool]] = []
    for event in events:
        if isinstance(event, SemRead):
            met.append((event.key, event.last_updated, False))
        elif isinstance(event, SemWrite) and event.status == "written":
            met.append((event.key, event.last_updated, True))
    return met


def version_stamped(events: Sequence[SemEntry.Event], stamp: str) -> int | None:
    """The position of the entry's version stamped ``stamp``; None when no version carries it."""
    for position, stored in enumerate(events):
        if iso_text(stored.timestamp) == stamp:
            return position
    return None


def missing_version(key: str, stamp: str) -> str:
    return f"SEM entry {key}: the version stamped {stamp} that the job read is missing"


def _fold(events: Sequence[SemEntry.Event]) -> SemEntry | None:
    entry: SemEntry | None = None
    for stored in events:
        entry = stored.mutate(entry)
    return entry
