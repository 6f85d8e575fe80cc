"""Use cases for a tenant's memories: remember a fact or an episode, forget one, read the log.

Every write appends to the tenant's memory log under the store's version check; a write that
lost a race with another writer reloads and tries again. A log is read from its newest snapshot
and the events after it (`domain.memories.MemorySnapshot`): a write's cost no longer grows with
the number of events in the log, only with its live memories.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from domain.aggregate import fold_events
from domain.errors import IntegrityFailure
from domain.events import RetrievalRequest, RetrievalResponse, RunEvent
from domain.governance import Actor
from domain.job import validate_tenant
from domain.memories import (
    SNAPSHOT_INTERVAL,
    TENANT_PRIVACY,
    InconsistentLog,
    Memory,
    MemoryLog,
    MemorySnapshot,
    UnknownMemory,
)
from domain.retrieval import memory_of
from infrastructure.storage.ops_clock import recorded_at
from infrastructure.storage.store import LedgerStore
from projections.redaction import shown_kept

SNAPSHOTS_TRIED: Final = 3
"""Snapshot positions a load looks at, newest first, before it reads the log from its start."""


class MemoryService:
    def __init__(self, store: LedgerStore) -> None:
        self.store = store

    def log(self, tenant: str, position: int | None = None) -> MemoryLog | None:
        """The tenant's memory log, as it stands or as it stood at ``position`` (None: empty).

        Read from the newest snapshot at or below that position and the events after it, each
        verified; with no snapshot there (none taken yet, or its writer stopped before it),
        from an older one or the log's start."""
        log_id = MemoryLog.id_for(validate_tenant(tenant))
        head = self.store.stream_version(log_id)
        wanted = head if position is None else min(position, head)
        if wanted < 1:
            return None
        base = self._snapshot_below(tenant, wanted)
        after = 0 if base is None else base.version
        events = list(self.store.verifying_store.get(log_id, gt=after, lte=wanted))
        try:
            log: object = fold_events(base, events)
        except InconsistentLog as error:
            source = "from its start" if base is None else f"from its snapshot at {after}"
            reason = f"the log's events do not follow {source}: {error}"
            raise IntegrityFailure(log_id, after + 1, reason) from None
        if not isinstance(log, MemoryLog):
            raise IntegrityFailure(log_id, after + 1, "stream is not a memory log")
        return log

    def _snapshot_below(self, tenant: str, position: int) -> MemoryLog | None:
        """The log restored from the newest of the last `SNAPSHOTS_TRIED` snapshot positions at
        or below ``position`` that has one (read together), or None."""
        newest = position - position % SNAPSHOT_INTERVAL
        versions = range(
            newest, max(newest - SNAPSHOTS_TRIED * SNAPSHOT_INTERVAL, 0), -SNAPSHOT_INTERVAL
        )
        streams = {v: MemorySnapshot.id_for(MemorySnapshot.name_at(tenant, v)) for v in versions}
        read = self.store.repository.read(list(streams.values()))
        for version, stream in streams.items():
            snapshot = self.store.repository.aggregate(MemorySnapshot, stream, read[stream])
            if snapshot is None:
                continue
            if (snapshot.tenant, snapshot.log_version) != (tenant, version):
                reason = f"the snapshot of {tenant}'s memory log at {version} says otherwise"
                raise IntegrityFailure(stream, 1, reason)
            return MemoryLog.restored(snapshot)
        return None

    def shown(self, tenant: str, reader: Actor | None) -> dict[str, Any]:
        """The tenant's live memories in write order and the log position, as ``reader`` (None:
        anonymous) may see them: personal data (kept before writes refused it) in full only to
        an admin (`personal_data.shown_kept`)."""
        log = self.log(tenant)
        denied = TENANT_PRIVACY.deny_sem_attributes
        return {
            "log_position": 0 if log is None else log.version,
            "memories": []
            if log is None
            else [
                {
                    **shown_kept(reader, None, memory.as_json(), denied),
                    "content": shown_kept(reader, memory.key, memory.content, denied),
                }
                for memory in log.live()
            ],
        }

    def memories(self, tenant: str) -> list[Memory]:
        log = self.log(tenant)
        return [] if log is None else log.live()

    def unresolved_hits(self, tenant: str, events: Sequence[tuple[int, RunEvent]]) -> list[str]:
        """For every retrieval among a job's ``(index, event)`` served from the tenant's
        memories: each hit that is no memory the log held at the position the retrieval names,
        said in one line (none: every hit resolves)."""
        responses = {e.request_id: (i, e) for i, e in events if isinstance(e, RetrievalResponse)}
        problems: list[str] = []
        for index, request in events:
            if not isinstance(request, RetrievalRequest) or request.memory_position is None:
                continue
            where = f"retrieval {request.request_id} (event {index})"
            position = request.memory_position
            live = self.live_at(tenant, position)
            if live is None:
                problems.append(f"{where}: the memory log never reached position {position}")
                continue
            held = {memory.memory_id for memory in live}
            answered = responses.get(request.request_id)
            hits = [] if answered is None else answered[1].hits
            problems += [
                f"{where}: hit {hit.uri} is no memory the log held at position {position}"
                for hit in hits
                if memory_of(tenant, hit.uri) not in held
            ]
        return problems

    def live_at(self, tenant: str, position: int) -> list[Memory] | None:
        """The tenant's live memories as the log stood at ``position``; None when the log never
        reached it."""
        if self.store.stream_version(MemoryLog.id_for(validate_tenant(tenant))) < position:
            return None
        log = self.log(tenant, position)
        return [] if log is None else log.live()

    def remember_fact(
        self, tenant: str, key: str, value: Any, labels: list[str], actor: Actor, origin: Any
    ) -> Memory:
        return self._remember(
            tenant, lambda log: log.remember_fact(key, value, labels, _provenance(actor, origin))
        )

    def remember_episode(
        self, tenant: str, text: str, labels: list[str], actor: Actor, origin: Any
    ) -> Memory:
        return self._remember(
            tenant, lambda log: log.remember_episode(text, labels, _provenance(actor, origin))
        )

    def forget(self, tenant: str, memory_id: str, reason: str, actor: Actor) -> None:
        def attempt() -> None:
            log = self.log(tenant)
            if log is None:
                raise UnknownMemory(memory_id)
            log.forget(memory_id, reason, _provenance(actor, None))
            self.store.save(*_with_snapshot(log))

        self.store.racing(attempt, f"forgetting {memory_id}")

    def _remember(self, tenant: str, write: Callable[[MemoryLog], Memory]) -> Memory:
        def attempt() -> Memory:
            log = self.log(tenant) or MemoryLog(tenant=tenant)
            memory = write(log)
            self.store.save(*_with_snapshot(log))
            return memory

        return self.store.racing(attempt, f"memory write for tenant {tenant}")


def _with_snapshot(log: MemoryLog) -> list[MemoryLog | MemorySnapshot]:
    """The log written, and its snapshot if the write takes it to a multiple of
    `SNAPSHOT_INTERVAL`: in the same transaction, so a write never stands without the snapshot
    it was due (a store written before snapshots has none: its logs are read from the start)."""
    if log.version % SNAPSHOT_INTERVAL:
        return [log]
    return [log, MemorySnapshot.of(log)]


def _provenance(actor: Actor, origin: Any) -> dict[str, Any]:
    """Who wrote, when (ops time, never a ranking input) and where it came from, if given."""
    return {"actor": actor.actor_id, "recorded_at": recorded_at(), "origin": origin}
