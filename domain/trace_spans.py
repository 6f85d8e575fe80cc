"""OpenTelemetry spans as plain values, and a trace assembled from them.

The entry points decode OTLP (protobuf or its JSON mapping) into `Span` values; everything after
that (grouping into traces, checking that a trace is whole, mapping it to a run) works on these
values alone. A trace is whole when it has exactly one root span (one without a parent), every
other span's parent is in it, and every span has ended: only then can it be recorded as a run,
since a missing span would be a model call, tool call or error the run never shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from domain.errors import InvalidInput

AttributeValue = str | bool | int | float | list["AttributeValue"] | dict[str, "AttributeValue"]
"""An OTLP ``AnyValue`` as JSON: arrays are lists, key-value lists objects, bytes hex strings."""


@dataclass(frozen=True, slots=True)
class SpanEvent:
    """An event inside a span (an ``exception`` event carries ``exception.type``/``.message``)."""

    name: str
    time_unix_nano: int
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Span:
    """One finished (or not) span; ids are lowercase hex, ``parent_span_id`` is empty at a root."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start_unix_nano: int
    end_unix_nano: int
    error: bool
    """The span's status is ERROR."""
    status_message: str
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()

    def as_json(self) -> dict[str, Any]:
        """The span as a JSON object (how the ledger holds a span until its trace is whole)."""
        return {
            **{f: getattr(self, f) for f in _SCALARS},
            "attributes": dict(self.attributes),
            "events": [
                {"name": e.name, "time_unix_nano": e.time_unix_nano, "attributes": e.attributes}
                for e in self.events
            ],
        }

    @classmethod
    def of_json(cls, held: Mapping[str, Any]) -> Span:
        return cls(
            **{f: held[f] for f in _SCALARS},
            attributes=held["attributes"],
            events=tuple(
                SpanEvent(e["name"], e["time_unix_nano"], e["attributes"]) for e in held["events"]
            ),
        )

    @property
    def ref(self) -> str:
        """How a message names the span: trace id, span id and name."""
        return f"span {self.trace_id}/{self.span_id} ({self.name!r})"

    @property
    def ended(self) -> bool:
        return self.end_unix_nano > 0 and self.end_unix_nano >= self.start_unix_nano


_SCALARS: Final = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "start_unix_nano",
    "end_unix_nano",
    "error",
    "status_message",
)


class SpanError(InvalidInput):
    """A span the ledger cannot take in; the message names the span and the attribute."""

    def __init__(self, span: Span, attribute: str, problem: str) -> None:
        super().__init__(f"{span.ref}: attribute {attribute}: {problem}")
        self.span = span
        self.attribute = attribute


def traces_of(spans: Iterable[Span]) -> dict[str, list[Span]]:
    """The spans by trace, each trace's spans once (a span sent twice is the same span) and in
    run order: by start time, then span id, so the same spans always give the same run.

    A span id sent again with other content is refused: which of the two happened?"""
    held: dict[str, dict[str, Span]] = {}
    for span in spans:
        trace = held.setdefault(span.trace_id, {})
        earlier = trace.get(span.span_id)
        if earlier is not None and earlier != span:
            msg = f"{span.ref}: sent twice with different content"
            raise InvalidInput(msg)
        trace[span.span_id] = span
    return {
        trace_id: sorted(trace.values(), key=lambda s: (s.start_unix_nano, s.span_id))
        for trace_id, trace in sorted(held.items())
    }


def why_incomplete(spans: list[Span]) -> str | None:
    """Why these spans (one trace's) are not a whole trace, or None when they are."""
    roots = [s for s in spans if not s.parent_span_id]
    if not roots:
        return "its root span (a span without a parent) has not arrived"
    if len(roots) > 1:
        names = ", ".join(s.span_id for s in roots)
        return f"it has {len(roots)} root spans ({names}); a trace has one"
    ids = {s.span_id for s in spans}
    for span in spans:
        if span.parent_span_id and span.parent_span_id not in ids:
            return f"the parent {span.parent_span_id} of {span.ref} has not arrived"
    for span in spans:
        if not span.ended:
            return f"{span.ref} has not ended"
    return None


def root_of(spans: list[Span]) -> Span:
    """The root span of a whole trace (`why_incomplete` said None)."""
    return next(s for s in spans if not s.parent_span_id)
