"""Use cases for the policy bundles in force over tenants' memories: set, clear, read.

Each scope (a tenant, or the global fallback) keeps its bundles in one policy book; a write that
lost a race with another writer reloads the book and tries again.
"""

from __future__ import annotations

from domain.errors import NotFoundError
from domain.governance import Actor
from domain.policy import PolicyBundle
from domain.policy_book import PolicyBook, scope_of
from infrastructure.storage.ops_clock import recorded_at
from infrastructure.storage.store import LedgerStore


class PolicyService:
    def __init__(self, store: LedgerStore) -> None:
        self.store = store

    def book(self, tenant: str | None) -> PolicyBook | None:
        return self.store.repository.find(PolicyBook, PolicyBook.id_for(scope_of(tenant)))

    def set_bundle(self, tenant: str | None, bundle_yaml: str, actor: Actor) -> PolicyBundle:
        """Put a bundle in force for a tenant (None: the global fallback); PolicyError if not."""

        def attempt() -> PolicyBundle:
            book = self.book(tenant) or PolicyBook(scope=scope_of(tenant))
            bundle = book.set_bundle(bundle_yaml, actor.actor_id, recorded_at())
            self.store.save(book)
            return bundle

        return self.store.racing(attempt, f"policy bundle for {scope_of(tenant)}")

    def clear_bundle(self, tenant: str | None, actor: Actor) -> None:
        def attempt() -> None:
            book = self.book(tenant)
            if book is None or book.bundle_yaml is None:
                raise NotFoundError(f"no policy bundle is set for {scope_of(tenant)}")
            book.clear(actor.actor_id, recorded_at())
            self.store.save(book)

        self.store.racing(attempt, f"policy bundle for {scope_of(tenant)}")

    def held_bundles(self, tenant: str) -> dict[str, str]:
        """Every policy bundle ever put in force for the tenant or store-wide, by its hash: the
        YAML as recorded (verified), which a run's gate decisions and policy references name."""
        held: dict[str, str] = {}
        for scope_tenant in (None, tenant):
            stream = PolicyBook.id_for(scope_of(scope_tenant))
            for stored in self.store.verifying_store.get(stream):
                if isinstance(stored, PolicyBook.BundleSet):
                    held[stored.bundle_hash] = stored.bundle_yaml
        return held

    def bundle_in_force(self, tenant: str) -> PolicyBook | None:
        """The book whose bundle applies to ``tenant``: its own, else the global one, else none."""
        for scope_tenant in (tenant, None):
            book = self.book(scope_tenant)
            if book is not None and book.bundle_yaml is not None:
                return book
        return None
