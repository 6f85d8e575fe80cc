"""The one tenancy rule: a tenant holds its own jobs, runs, receipts and memories, and no other's.

Ids are scoped by tenant in storage; where a record could still sit under a bare id (recorded
before ids were scoped, or a default-tenant name), the tenant it records decides. Either way
another tenant's record is answered exactly as one that does not exist, ``NotFoundError("no job
X")``, so that an id tells one tenant nothing about another: not by the answer, and not by the
work done to reach it (`StandIn`). Every use case that looks a record up by id asks here; the
HTTP API through FastAPI dependencies (`infrastructure.api.context`), the command line through
the use cases it calls with ``--tenant``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from uuid import UUID

from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import StoredEvent

from domain.aggregate import MaceAggregate
from domain.errors import NotFoundError
from infrastructure.storage.store import LedgerStore


def holds(tenant: str, owner: str | None) -> bool:
    """Whether ``tenant`` holds a record recorded for ``owner`` (None: there is no record)."""
    return owner is not None and owner == tenant


def require_holder(tenant: str, owner: str | None, what: str) -> None:
    """`NotFoundError` ("no <what>") unless ``tenant`` holds the record, as if there were none."""
    if not holds(tenant, owner):
        raise NotFoundError(f"no {what}")


class StandIn:
    """A signed record of one kind, never stored, checked and decoded where a lookup finds none.

    Whose a record is is read from its stream's first record, once its MAC holds and it is
    decoded (nothing of a record is trusted before). A lookup that found no record would skip
    that work, and the time saved would tell a tenant that another tenant holds the id. So an
    id nobody holds pays for a stand-in of the same kind instead, by the same steps: a record
    built as one read from a row is (its id parsed from text), its MAC checked, decoded, as a
    login runs the password hasher for a user that does not exist. It is built and signed by
    the store's active key the first time it is needed, and never used for anything else.
    """

    def __init__(self, store: LedgerStore, made: Callable[[], MaceAggregate]) -> None:
        self._mapper = store.verifying_store.signed_mapper
        self._made = made
        self._row: tuple[str, int, str, bytes] | None = None

    def records(self, records: Sequence[StoredEvent]) -> Sequence[StoredEvent]:
        """A stream's ``records`` as read; when there are none, the stand-in's, to be checked
        and decoded by the same steps in their place (and then dropped by the caller)."""
        if records:
            return records
        if self._row is None:
            (created,) = self._made().collect_events()
            signed = self._mapper.to_stored_event(created)
            self._row = (
                str(signed.originator_id),
                signed.originator_version,
                signed.topic,
                signed.state,
            )
        originator_id, version, topic, state = self._row
        # Built anew from its columns each time, as the recorder builds a record read.
        return [StoredEvent(UUID(originator_id), version, topic, state)]

    def first(self, records: Sequence[StoredEvent]) -> DomainEventProtocol[UUID] | None:
        """The first of a stream's ``records``, its MAC checked, decoded; None when it has
        none, once the stand-in has been checked and decoded in its place."""
        event = self._mapper.to_domain_event(self.records(records)[0])
        return event if records else None
