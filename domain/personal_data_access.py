"""The record of who read personal data in full (seed 000 section 10: PII only to Admin, logged).

One append-only log per tenant, ``personal-data-access:<tenant>``. Each read of a job's events
that carry personal data, shown unredacted to an admin, appends one signed entry before the data
is served: who (actor and roles), which job, which events (stream versions), through what
(``http`` or ``cli``), and when, as ops metadata (wall-clock time is never decision input here).
An entry follows from the log's last version alone, so a reader need not load the whole log.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import DomainEventProtocol, event

from domain.aggregate import MaceAggregate
from domain.governance import Actor
from domain.job import validate_job_id, validate_tenant


class PersonalDataAccessLog(MaceAggregate):
    class Opened(MaceAggregate.Created):
        tenant: str

    class Read(MaceAggregate.Event):
        actor: dict[str, Any]
        job_id: str
        versions: list[int]
        channel: str
        accessed_at: str

    NAME_PREFIX = "personal-data-access"
    NAME_FIELD = "tenant"

    @event(Opened)
    def __init__(self, tenant: str) -> None:
        self.tenant = validate_tenant(tenant)

    @classmethod
    def entry(
        cls,
        tenant: str,
        last_version: int,
        actor: Actor,
        job_id: str,
        versions: list[int],
        channel: str,
        accessed_at: str,
    ) -> list[DomainEventProtocol[Any]]:
        """The events that append one read to the log whose last version is ``last_version``.

        ``last_version`` 0: the log does not exist yet, and is opened by the same events.
        """
        validate_job_id(job_id)
        opening: list[DomainEventProtocol[Any]] = []
        if last_version == 0:
            opening = list(cls(tenant=tenant).collect_events())
            last_version = len(opening)
        read = cls.appended(
            tenant,
            last_version,
            cls.Read,
            actor=actor.as_json(),
            job_id=job_id,
            versions=sorted(versions),
            channel=channel,
            accessed_at=accessed_at,
        )
        return [*opening, read]
