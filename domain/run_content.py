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
from dataclasses import dataclass
from typing import Any

from eventsourcing.domain import event

from domain.aggregate import MaceAggregate
from domain.canonical import Written, digest, write
from domain.events import RunCompleted, RunEvent, RunStarted
from domain.job import validate_job_id, validate_tenant
from domain.naming import tenant_scoped


@dataclass(frozen=True, slots=True)
class RunContents:
    """A run's start, events and completion, each in its JSON form (``model_dump(mode="json")``)
    and that form written canonically, once: what the privacy rules search, what the limits
    measure (each event's canonical size) and what the content digest covers."""

    forms: list[dict[str, Any]]
    written: list[Written]

    @classmethod
    def of(
        cls, started: RunStarted, events: Sequence[RunEvent], completed: RunCompleted
    ) -> RunContents:
        forms = [item.model_dump(mode="json") for item in (started, *events, completed)]
        return cls(forms, [write(form) for form in forms])

    def digest(self) -> str:
        """The content digest: the canonical JSON of the start, events and completion, hashed (each
        part's bytes as written once, the same bytes as writing the whole anew)."""
        written = self.written
        return digest({"started": written[0], "events": written[1:-1], "completed": written[-1]})

    def payloads(self) -> list[dict[str, Any]]:
        """What each part stores (its form without its type, as `RunEvent.payload` says)."""
        return [{k: v for k, v in form.items() if k != "type"} for form in self.forms]

    def event_sizes(self) -> list[int]:
        """Each event's canonical size, as the run's limits count it."""
        return [len(written.data) for written in self.written[1:-1]]


def run_content_digest(
    started: RunStarted, events: Sequence[RunEvent], completed: RunCompleted
) -> str:
    return RunContents.of(started, events, completed).digest()


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
