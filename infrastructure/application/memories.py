"""Use cases for a tenant's memories and for the policy bundles in force over them.

Every write appends to one stream (the tenant's memory log, or a policy book) under the store's
version check; a write that lost a race with another writer reloads and tries again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from eventsourcing.application import AggregateNotFoundError

from domain.governance import Actor
from domain.job import validate_tenant
from domain.memories import Memory, MemoryLog, UnknownMemory
from domain.policy import PolicyBundle
from domain.policy_book import PolicyBook, scope_of
from infrastructure.storage.errors import NotFoundError
from infrastructure.storage.ops_clock import recorded_at

if TYPE_CHECKING:
    from infrastructure.application.ledger import Ledger


class MemoryService:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    # Memories

    def log(self, tenant: str, position: int | None = None) -> MemoryLog | None:
        """The tenant's memory log, as it stands or as it stood at ``position`` (None: empty)."""
        log_id = MemoryLog.id_for(validate_tenant(tenant))
        try:
            log: MemoryLog = self.ledger.repository.get(log_id, version=position)
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
            self.ledger.save(log)

        self.ledger.retrying(attempt, f"forgetting {memory_id}")

    def _remember(self, tenant: str, write: Callable[[MemoryLog], Memory]) -> Memory:
        def attempt() -> Memory:
            log = self.log(tenant) or MemoryLog(tenant=tenant)
            memory = write(log)
            self.ledger.save(log)
            return memory

        return self.ledger.retrying(attempt, f"memory write for tenant {tenant}")

    # Policy bundles

    def book(self, tenant: str | None) -> PolicyBook | None:
        try:
            book: PolicyBook = self.ledger.repository.get(PolicyBook.id_for(scope_of(tenant)))
        except AggregateNotFoundError:
            return None
        return book

    def set_bundle(self, tenant: str | None, bundle_yaml: str, actor: Actor) -> PolicyBundle:
        """Put a bundle in force for a tenant (None: the global fallback); PolicyError if not."""

        def attempt() -> PolicyBundle:
            book = self.book(tenant) or PolicyBook(scope=scope_of(tenant))
            bundle = book.set_bundle(bundle_yaml, actor.actor_id, recorded_at())
            self.ledger.save(book)
            return bundle

        return self.ledger.retrying(attempt, f"policy bundle for {scope_of(tenant)}")

    def clear_bundle(self, tenant: str | None, actor: Actor) -> None:
        def attempt() -> None:
            book = self.book(tenant)
            if book is None or book.bundle_yaml is None:
                raise NotFoundError(f"no policy bundle is set for {scope_of(tenant)}")
            book.clear(actor.actor_id, recorded_at())
            self.ledger.save(book)

        self.ledger.retrying(attempt, f"policy bundle for {scope_of(tenant)}")

    def bundle_in_force(self, tenant: str) -> PolicyBook | None:
        """The book whose bundle applies to ``tenant``: its own, else the global one, else none."""
        for scope_tenant in (tenant, None):
            book = self.book(scope_tenant)
            if book is not None and book.bundle_yaml is not None:
                return book
        return None


def _provenance(actor: Actor, origin: Any) -> dict[str, Any]:
    """Who wrote, when (ops time, never a ranking input) and where it came from, if given."""
    return {"actor": actor.actor_id, "recorded_at": recorded_at(), "origin": origin}
