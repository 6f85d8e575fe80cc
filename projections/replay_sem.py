"""SEM as a job met it, for its replay: the tenant's SEM log where the ledger recorded the job.

What a job read or wrote is the job's claim; what the ledger holds is each key's signed history
and the place of each version in the ledger's one log (its notification id, which checkpoints
sign). The replay never rebuilds memory from the claim. The job's place is the log position of
its first stored record, the ledger's own evidence of when it recorded the job: nothing
store-specific enters the job's events, so the same job still gives the same bytes in any
store. An iteration's memory (`MemoryAtPosition`) is each key folded from its versions placed
before the job, then the writes the replay itself re-made in the job's earlier iterations. The
re-run then reads what the ledger held: a claimed miss of a key that was present, or a value or
stamp that differs, diverges on the iteration's ``sem_reads`` (iteration, key and both values),
and each ``written`` `SemWrite` must be a version the ledger holds as written by this job
(`sem_claim_problem`), or it diverges too.

Why the job's first record is where it met SEM:

- A Stage-0 job the ledger runs reads SEM, then commits the job with its SEM writes in one
  transaction (its writes come after its first record). Another writer may change a key the job
  only read in between: the commit checks, inside its transaction, that each key it only read is
  still at the version it read (`LedgerStore.save_unmoved`), else it conflicts and the job runs
  again on what is there now (`LedgerStore.racing`). Saves are serialised (`stream_reads`), so
  no version can land between that check and the commit: what the job read is what the log
  holds just before its first record. A key it wrote conflicts on its own stream the same way.
- A run recorded from outside claims its reads. Ingest refuses what the ledger already
  contradicts (a stamp no version of the key carries, a value that is not that version's, a
  write the ledger did not make for this run: `sem_claim_problem`), with nothing written; a read
  that names a real version but not the one current when the run was recorded, or a miss of a
  key that was present then, is not provable: it diverges at replay.
- Jobs recorded before the commit checked its reads are replayed the same way; one that lost
  that race diverges on the key it read (the ledger cannot tell a lost race from a false claim).

A claim is never an integrity failure: a stamp no version carries is an emitter's claim, and
its version is not looked for. A version deleted from the store is caught where the store is
verified: the key's stream read short of the head the newest checkpoint signed fails there
(``INTEGRITY_FAILURE``), whatever the job claims.

A run bundle holds the job's own records and the SEM versions it claims to have met, not the
tenant's SEM log: there `MemoryAsRecorded` rebuilds each key to the version the job first met,
and the verdict says the SEM facts were taken as recorded.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from domain.canonical import canonical_json
from domain.determinism import iso_text
from domain.events import RunEvent, SemRead, SemWrite
from domain.sem import SemEntry


class SemVersions(Protocol):
    def sem_events(self, tenant: str, key: str) -> Sequence[SemEntry.Event]:
        """Every event of the tenant's SEM entry under the key, verified, in version order (none:
        empty)."""


class SemHistory(SemVersions, Protocol):
    def sem_positions(self, tenant: str, key: str) -> Mapping[int, int]:
        """The log position (notification id) of each version of the tenant's entry."""


class MemoryAtPosition:
    """A `SemSource`: each key of the tenant as the ledger's SEM log held it before
    ``position`` (asked for when a key is first read: a job that meets no SEM costs no read),
    then ``written`` (the job's own writes, as its earlier iterations re-made them)."""

    def __init__(
        self,
        history: SemHistory,
        tenant: str,
        position: Callable[[], int],
        written: Mapping[str, SemEntry],
    ) -> None:
        self._history = history
        self.tenant = tenant
        self._position = position
        self._written = written

    def entry(self, key: str) -> SemEntry | None:
        if key in self._written:
            # The caller may write to it: the next iteration starts from this one's entry.
            return copy.deepcopy(self._written[key])
        job_at = self._position()
        positions = self._history.sem_positions(self.tenant, key)
        before: list[SemEntry.Event] = []
        for stored in self._history.sem_events(self.tenant, key):
            # Versions are placed in the log in version order: the first one at or after the
            # job (or not placed yet: appended since the events were read) ends the history.
            if positions.get(stored.originator_version, job_at) >= job_at:
                break
            before.append(stored)
        return _fold(before)


class MemoryAsRecorded:
    """A `SemSource` answering with each key's entry of the job's tenant as the job says it
    first met it (a bundle's replay: the tenant's SEM log is not there to say otherwise)."""

    def __init__(self, history: SemVersions, tenant: str, events: Iterable[RunEvent]) -> None:
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
            # No version carries the claimed stamp: the re-run meets no entry, and its reads
            # and writes differ from the claim where they use it.
            return None
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


def held_version(history: SemVersions, tenant: str, key: str, stamp: str) -> dict[str, Any] | None:
    """The tenant's version of ``key`` stamped ``stamp`` as the ledger holds it (its value, its
    stamp and who wrote it); None when no version carries the stamp."""
    events = history.sem_events(tenant, key)
    at = version_stamped(events, stamp)
    if at is None:
        return None
    held = events[at]
    return {
        "value": getattr(held, "value", None),
        "last_updated": stamp,
        "source": getattr(held, "source", None),
    }


def sem_claim_problem(
    history: SemVersions, tenant: str, job_id: str, event: SemRead | SemWrite
) -> str | None:
    """What the ledger's SEM log contradicts in a read that names a version, or a write said
    to be made (None: nothing). A miss, or a failed write, claims no version."""
    if not (event.exists if isinstance(event, SemRead) else event.status == "written"):
        return None
    what = "reads" if isinstance(event, SemRead) else "writes"
    if event.last_updated is None:
        return f"{what} {event.key} but names no version of it (last_updated)"
    held = held_version(history, tenant, event.key, event.last_updated)
    if held is None:
        outside = " (a run recorded from outside does not write the tenant's SEM)" * (
            isinstance(event, SemWrite)
        )
        return (
            f"{what} {event.key} at {event.last_updated}, a version the ledger does not hold"
            + outside
        )
    if canonical_json(held["value"]) != canonical_json(event.value):
        return (
            f"{what} {event.key} at {event.last_updated} as {canonical_json(event.value).decode()}"
            f", but that version holds {canonical_json(held['value']).decode()}"
        )
    if isinstance(event, SemWrite) and held["source"] != f"job:{job_id}":
        return (
            f"writes {event.key} at {event.last_updated}, a version the ledger stored for"
            f" {held['source']}, not for this run"
        )
    return None


def sem_differences(
    history: SemVersions | None,
    tenant: str,
    job_id: str,
    recorded: Sequence[RunEvent],
    replayed: Sequence[RunEvent],
) -> list[tuple[str, Any, Any]]:
    """Where an iteration's SEM facts differ, each as ``(field, recorded, replayed)`` named by
    its key: the first read, then the first write, that differs from the re-run's (which met
    the tenant's SEM as the ledger held it); then, with the ledger's ``history``, each
    ``written`` write that is not a version the ledger holds as this job's, against what it
    holds at that stamp (None: nothing)."""
    found: list[tuple[str, Any, Any]] = []
    for kind, name in ((SemRead, "sem_read"), (SemWrite, "sem_write")):
        was = [e.payload() for e in recorded if isinstance(e, kind)]
        now = [e.payload() for e in replayed if isinstance(e, kind)]
        for claimed, met in itertools.zip_longest(was, now):
            if claimed is None or met is None or canonical_json(claimed) != canonical_json(met):
                found.append((f"{name} {(claimed or met)['key']}", claimed, met))
                break
    if history is None:
        return found
    for event in recorded:
        if not isinstance(event, SemWrite) or not sem_claim_problem(history, tenant, job_id, event):
            continue
        claimed = {
            "value": event.value,
            "last_updated": event.last_updated,
            "source": f"job:{job_id}",
        }
        stamp = event.last_updated
        held = None if stamp is None else held_version(history, tenant, event.key, stamp)
        found.append((f"sem_write {event.key}", claimed, held))
    return found


def _fold(events: Sequence[SemEntry.Event]) -> SemEntry | None:
    entry: SemEntry | None = None
    for stored in events:
        entry = stored.mutate(entry)
    return entry
