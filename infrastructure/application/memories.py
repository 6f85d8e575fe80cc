"""Use cases for a tenant's memories: remember a fact or an episode, forget one, read the log.

Every write appends to the tenant's memory log under the store's version check; a write that
lost a race with another writer reloads and tries again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eventsourcing.application import AggregateNotFoundError

from domain.governance import Actor
from domain.job import validate_tenant
from domain.memories import Memory, MemoryLog, UnknownMemory
from infrastructure.storage.ops_clock import recorded_at
from infrastructure.storage.store import LedgerStore


class MemoryService:
    def __init__(self, store: LedgerStore) -> None:
        self.store = store

    def log(self, tenant: str, position: int | None = None) -> MemoryLog | None:
        """The tenant's memory log, as it stands or as it stood at ``position`` (None: empty)."""
        log_id = MemoryLog.id_for(validate_tenant(tenant))
        try:
            log: MemoryLog = self.store.repository.get(log_id, version=position)
        except AggregateNotFoundError:
            return None
        return log

    def memories(self, tenant: str) -> list[Memory]:
        log = self.log(tenant)
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
            self.store.save(log)

        self.store.retrying(attempt, f"forgetting {memory_id}")

    def _remember(self, tenant: str, write: Callable[[MemoryLog], Memory]) -> Memory:
        def attempt() -> Memory:
            log = self.log(tenant) or MemoryLog(tenant=tenant)
            memory = write(log)
            self.store.save(log)
            return memory

        return self.store.retrying(attempt, f"memory write for tenant {tenant}")


def _provenance(actor: Actor, origin: Any) -> dict[str, Any]:
    """Who wrote, when (ops time, never a ranking input) and where it came from, if given."""
    return {"actor": actor.actor_id, "recorded_at": recorded_at(), "origin": origin}
