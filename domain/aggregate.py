"""The base every MACE aggregate and event shares: pydantic events on deterministic time.

Events are frozen pydantic models (validated on the way in, dumped to canonical JSON on the way
out). Each aggregate names a clock seed; the timestamp of its event at version ``v`` is
``DeterministicClock(seed).at(v)``. The same commands on the same inputs therefore produce
byte-identical events in any store, and nothing in the domain ever reads the wall clock: human
time (for governance and receipts) arrives as plain data from the outside, never as `timestamp`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, ClassVar, Self, TypeVar
from uuid import UUID

from eventsourcing.domain import BaseAggregate, CanInitAggregate, CanMutateAggregate
from pydantic import BaseModel, ConfigDict

from domain.canonical import Written
from domain.determinism import DeterministicClock
from domain.errors import InvalidInput
from domain.naming import aggregate_id, tenant_scoped


class DomainEvent(BaseModel):
    """A fact, immutable once made. `class_version` drives eventsourcing's upcasting."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    class_version: ClassVar[int] = 1

    originator_id: UUID
    originator_version: int
    timestamp: datetime

    def kept_fields(self) -> dict[str, Written]:
        """Fields whose canonical bytes were kept when the event was made (`Job.record`), for
        the record that stores it to take as they are; none by default."""
        return {}

    @staticmethod
    def create_timestamp() -> datetime:
        # eventsourcing falls back to the wall clock when no timestamp is given; MACE never does.
        msg = "MACE events take their timestamp from a deterministic clock; none was given"
        raise RuntimeError(msg)


E = TypeVar("E", bound=DomainEvent)


def fold_events(aggregate: Any, events: Iterable[Any]) -> Any:
    """``aggregate`` (None: none yet) with ``events`` applied in order, each by its ``mutate``.

    eventsourcing's default projector asserts ``isinstance(event, CanMutateProtocol)`` for every
    event; against a runtime-checkable Protocol that check walks the protocol's members each time
    and took about 40% of loading an aggregate. Every event the ledger folds is a MACE pydantic
    event, so its ``mutate`` is called directly."""
    for event in events:
        aggregate = event.mutate(aggregate)
    return aggregate


class MaceAggregate(BaseAggregate[UUID]):
    """An aggregate named ``<NAME_PREFIX>:<key>``, stamped by a clock seeded from its identity.

    The id is the UUIDv5 of that stable name, so creating the same aggregate twice collides in the
    event log. By default the clock seed is the stable name too; a Job overrides it with its seed.
    """

    NAME_PREFIX: ClassVar[str]
    NAME_FIELD: ClassVar[str]

    class Event(DomainEvent, CanMutateAggregate[UUID]):
        pass

    class Created(Event, CanInitAggregate[UUID]):
        originator_topic: str

    @classmethod
    def folded(cls, events: Iterable[Any]) -> object:
        """What a stream's events make, read back in order from its first (`fold_events`)."""
        return fold_events(None, events)

    @classmethod
    def id_for(cls, key: str) -> UUID:
        return aggregate_id(f"{cls.NAME_PREFIX}:{key}")

    @classmethod
    def id_in(cls, tenant: str, key: str) -> UUID:
        """The id of the tenant's aggregate named ``key`` (see `tenant_scoped`)."""
        return cls.id_for(tenant_scoped(tenant, key))

    @classmethod
    def name_of(cls, fields: Mapping[str, Any]) -> str:
        """The key the aggregate is named by, from its creation arguments (or its attributes).

        The name field itself by default; a tenant's aggregate scopes it by its tenant.
        """
        return str(fields[cls.NAME_FIELD])

    @classmethod
    def clock_seed_of(cls, created_with: dict[str, Any]) -> str:
        """The clock seed, computed from the arguments the aggregate is created with."""
        return f"{cls.NAME_PREFIX}:{cls.name_of(created_with)}"

    @property
    def clock_seed(self) -> str:
        return f"{self.NAME_PREFIX}:{self.name_of(vars(self))}"

    @classmethod
    def _create(
        cls,
        event_class: type[CanInitAggregate[UUID]],
        *,
        id: UUID | None = None,
        **kwargs: Any,
    ) -> Self:
        kwargs["timestamp"] = DeterministicClock(cls.clock_seed_of(kwargs)).at(cls.INITIAL_VERSION)
        own_id = cls.id_for(cls.name_of(kwargs))
        if id is not None and id != own_id:
            msg = f"{cls.__name__} ids follow from their names; {id} is not {own_id}"
            raise InvalidInput(msg)
        return super()._create(event_class, id=own_id, **kwargs)

    @classmethod
    def appended(cls, name_key: str, last_version: int, event_class: type[E], **fields: Any) -> E:
        """The event after ``last_version`` of the aggregate named ``name_key``, made unloaded.

        For append-only streams whose next event follows from the last one alone (the
        checkpoint chain, a tenant's personal-data access log): a writer need not read the whole
        stream to append.
        """
        version = last_version + 1
        return event_class(
            originator_id=cls.id_for(name_key),
            originator_version=version,
            timestamp=DeterministicClock(f"{cls.NAME_PREFIX}:{name_key}").at(version),
            **fields,
        )

    def trigger_event(self, event_class: type[CanMutateAggregate[UUID]], **kwargs: Any) -> None:
        kwargs["timestamp"] = DeterministicClock(self.clock_seed).at(self.version + 1)
        super().trigger_event(event_class, **kwargs)
