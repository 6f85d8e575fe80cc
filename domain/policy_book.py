"""Which policy bundle is in force: one book per tenant, and a global one as the fallback.

Setting a bundle keeps its YAML verbatim (a receipt freezes exactly that text) and its hash; a
bundle that does not load is refused before anything is written. Clearing a tenant's bundle makes
the global bundle (if any) apply again. Receipts never read a book back: they carry their own
snapshot, so a bundle changed or cleared later does not change what a receipt replays under.
"""

from __future__ import annotations

from typing import Final

from eventsourcing.domain import event

from domain.aggregate import MaceAggregate
from domain.job import validate_tenant
from domain.policy import PolicyBundle, parse_bundle

GLOBAL_SCOPE: Final = "global"


def scope_of(tenant: str | None) -> str:
    """The book name for a tenant, or the global book for ``None``.

    Tenant names may themselves be ``global``, so tenant books are prefixed and cannot collide.
    """
    return GLOBAL_SCOPE if tenant is None else f"tenant/{validate_tenant(tenant)}"


class PolicyBook(MaceAggregate):
    NAME_PREFIX = "policy-book"
    NAME_FIELD = "scope"

    class Opened(MaceAggregate.Created):
        scope: str

    class BundleSet(MaceAggregate.Event):
        bundle_yaml: str
        bundle_hash: str
        actor_id: str
        recorded_at: str

    class BundleCleared(MaceAggregate.Event):
        actor_id: str
        recorded_at: str

    @event(Opened)
    def __init__(self, scope: str) -> None:
        self.scope = scope
        self.bundle_yaml: str | None = None
        self.bundle_hash: str | None = None

    def set_bundle(self, bundle_yaml: str, actor_id: str, recorded_at: str) -> PolicyBundle:
        """Load the bundle (PolicyError if it is refused), then put it in force."""
        bundle = parse_bundle(bundle_yaml)
        self._bundle_set(
            bundle_yaml=bundle_yaml,
            bundle_hash=bundle.bundle_hash,
            actor_id=actor_id,
            recorded_at=recorded_at,
        )
        return bundle

    def clear(self, actor_id: str, recorded_at: str) -> None:
        if self.bundle_yaml is None:
            msg = f"no policy bundle is set for {self.scope}"
            raise LookupError(msg)
        self._bundle_cleared(actor_id=actor_id, recorded_at=recorded_at)

    @event(BundleSet)
    def _bundle_set(
        self, bundle_yaml: str, bundle_hash: str, actor_id: str, recorded_at: str
    ) -> None:
        self.bundle_yaml = bundle_yaml
        self.bundle_hash = bundle_hash

    @event(BundleCleared)
    def _bundle_cleared(self, actor_id: str, recorded_at: str) -> None:
        self.bundle_yaml = None
        self.bundle_hash = None
