"""The spans of one trace held in the ledger until the trace is whole and can be recorded.

OTLP exporters send a trace's spans as they end, over several requests and in any order. Each
request's new spans are one signed event on the trace's own stream (one stream per tenant and
trace id), so what the service acknowledged survives a restart. A span sent again with the same
content is held once; with other content it is refused. A span refused as it arrived (it
cannot be taken in) is held as refused, by its id and why, never its content: the trace is not
whole while it is, so a run is never recorded without it; the same span sent again and taken in
replaces the mark. Once the trace is recorded as a run (`Recorded`, naming the job) or found
unrecordable (`Refused`, saying why), it takes no more.

``received_at`` on each arrival is operations time (the service's wall clock), never a decision
input of the run: it only says when the trace last changed, for the quiet period after which a
whole trace is recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eventsourcing.domain import event

from domain.aggregate import MaceAggregate
from domain.canonical import digest
from domain.job import validate_job_id, validate_tenant
from domain.naming import tenant_scoped
from domain.trace_spans import Span


class HeldTrace(MaceAggregate):
    class Opened(MaceAggregate.Created):
        name: str
        tenant: str
        trace_id: str

    class SpansArrived(MaceAggregate.Event):
        spans: list[dict[str, Any]]
        received_at: float

    class SpansRefused(MaceAggregate.Event):
        refused: dict[str, str]
        received_at: float

    class Recorded(MaceAggregate.Event):
        job_id: str

    class Refused(MaceAggregate.Event):
        reason: str

    NAME_PREFIX = "held-trace"
    NAME_FIELD = "name"

    @event(Opened)
    def __init__(self, name: str, tenant: str, trace_id: str) -> None:
        self.name = name
        self.tenant = validate_tenant(tenant)
        self.trace_id = trace_id
        self.spans: dict[str, dict[str, Any]] = {}
        self.digests: dict[str, str] = {}
        self.last_received_at = 0.0
        self.refused_spans: dict[str, str] = {}
        self.job_id: str | None = None
        self.refused: str | None = None

    @staticmethod
    def named(tenant: str, trace_id: str) -> str:
        return tenant_scoped(validate_tenant(tenant), trace_id)

    @classmethod
    def name_of(cls, fields: Mapping[str, Any]) -> str:
        return cls.named(fields["tenant"], fields["trace_id"])

    @property
    def closed(self) -> bool:
        return self.job_id is not None or self.refused is not None

    def held_spans(self) -> list[Span]:
        return [Span.of_json(span) for span in self.spans.values()]

    def take(
        self, spans: list[Span], received_at: float, turned_away: Mapping[str, str] | None = None
    ) -> tuple[int, list[str]]:
        """Hold those of ``spans`` not held yet, and mark as refused those of ``turned_away``
        (span id: why it could not be taken in) not held yet; how many were new, and one line
        for each span refused (sent before with other content, or after the trace was closed)."""
        fresh: dict[str, dict[str, Any]] = {}
        refused: list[str] = []
        marks = {
            span_id: why
            for span_id, why in (turned_away or {}).items()
            if span_id not in self.digests and self.refused_spans.get(span_id) != why
        }
        if marks and not self.closed:
            self._turned_away(refused=marks, received_at=received_at)
        for span in spans:
            content = span.as_json()
            held = self.digests.get(span.span_id)
            if held is None and span.span_id not in fresh:
                if self.closed:
                    refused.append(f"{span.ref}: its trace was recorded or refused already")
                else:
                    fresh[span.span_id] = content
            elif (held or digest(fresh[span.span_id])) != digest(content):
                refused.append(f"{span.ref}: sent before with other content")
        if fresh:
            self._arrived(spans=list(fresh.values()), received_at=received_at)
        return len(fresh), refused

    @event(SpansArrived)
    def _arrived(self, spans: list[dict[str, Any]], received_at: float) -> None:
        for span in spans:
            self.spans[span["span_id"]] = span
            self.digests[span["span_id"]] = digest(span)
            self.refused_spans.pop(span["span_id"], None)
        self.last_received_at = max(self.last_received_at, received_at)

    @event(SpansRefused)
    def _turned_away(self, refused: dict[str, str], received_at: float) -> None:
        self.refused_spans.update(refused)
        self.last_received_at = max(self.last_received_at, received_at)

    @event(Recorded)
    def recorded(self, job_id: str) -> None:
        self.job_id = validate_job_id(job_id)

    @event(Refused)
    def refuse(self, reason: str) -> None:
        self.refused = reason
