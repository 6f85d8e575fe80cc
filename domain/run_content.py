"""Which job recorded a run's content, per tenant: the same run sent again is a duplicate.

A run recorded from outside (``mace ingest``) without a ``job_id`` gets an id derived from the
store's job number (seed 004 D3), so the same file ingested twice would otherwise be two jobs.
Its *content digest* is the SHA-256 of the canonical JSON of its start, its events and its
completion, exactly as validated. One small stream per (tenant, digest), written in the job's
own transaction, names the job that recorded it: a run whose stream exists is answered with
that job, and nothing new is written. Another tenant's identical run is its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from eventsourcing.domain import event

from domain.aggregate import MaceAggregate
from domain.canonical import digest
from domain.events import RunCompleted, RunEvent, RunStarted
from domain.job import validate_job_id, validate_tenant
from domain.naming import tenant_scoped


def run_content_digest(
    started: RunStarted, events: Sequence[RunEvent], completed: RunCompleted
) -> str:
    return digest(
        {
            "started": started.model_dump(mode="json"),
            "events": [e.model_dump(mode="json") for e in events],
            "completed": completed.model_dump(mode="json"),
        }
    )


class RunContent(MaceAggregate):
    class Recorded(MaceAggregate.Created):
        name: str
        job_id: str

    NAME_PREFIX = "run-content"
    NAME_FIELD = "name"

    @event(Recorded)
    def __init__(self, name: str, job_id: str) -> None:
        self.name = name
        self.job_id = validate_job_id(job_id)

    @staticmethod
    def named(tenant: str, content_digest: str) -> str:
        """The index's name: the digest, scoped by the tenant as every tenant's name is."""
        return tenant_scoped(validate_tenant(tenant), content_digest)
