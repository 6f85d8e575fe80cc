"""OTLP trace exports (``ExportTraceServiceRequest``) decoded into `domain.trace_spans.Span`.

Decoded with the protocol's own generated messages (`opentelemetry-proto`): protobuf bytes with
``ParseFromString``, the JSON encoding with protobuf's JSON mapping. OTLP/JSON differs from that
mapping in one documented way: trace and span ids are hex strings, not base64; they are turned
into the mapping's form before it parses, and nothing else is read by hand. Unknown fields are
ignored, as the OTLP specification asks of a receiver.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any, Final

from google.protobuf.json_format import ParseDict, ParseError
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from domain.errors import InvalidInput
from domain.json_input import JSONInputError, parse_json_input
from domain.trace_spans import AttributeValue, Span, SpanEvent

_ID_FIELDS: Final = ("traceId", "spanId", "parentSpanId")
_ID_BYTES: Final = {"trace_id": 16, "span_id": 8}


def spans_of_protobuf(raw: bytes) -> list[Span]:
    """The spans of a protobuf-encoded ``ExportTraceServiceRequest``."""
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(raw)
    except DecodeError as exc:
        msg = f"not an OTLP ExportTraceServiceRequest in protobuf: {exc}"
        raise InvalidInput(msg) from None
    return _spans_of(request)


def spans_of_json(raw: bytes) -> list[Span]:
    """The spans of an ``ExportTraceServiceRequest`` in OTLP/JSON (what exporters write to files
    and send as ``application/json``)."""
    try:
        document = parse_json_input(raw)
    except JSONInputError as exc:
        msg = f"{exc}; expected an OTLP ExportTraceServiceRequest"
        raise InvalidInput(msg) from None
    if not isinstance(document, dict):
        msg = "expected an OTLP ExportTraceServiceRequest (a JSON object with resourceSpans)"
        raise InvalidInput(msg)
    request = ExportTraceServiceRequest()
    try:
        ParseDict(_ids_as_base64(document), request, ignore_unknown_fields=True)
    except ParseError as exc:
        msg = f"not an OTLP ExportTraceServiceRequest: {exc}"
        raise InvalidInput(msg) from None
    return _spans_of(request)


def _ids_as_base64(document: dict[str, Any]) -> dict[str, Any]:
    """The request with each span's (and span link's) hex ids as the JSON mapping's base64."""
    for resource in _objects(document.get("resourceSpans")):
        for scope in _objects(resource.get("scopeSpans")):
            for span in _objects(scope.get("spans")):
                _convert_ids(span)
                for link in _objects(span.get("links")):
                    _convert_ids(link)
    return document


def _objects(value: Any) -> list[dict[str, Any]]:
    # A field of the wrong shape is left for the parser, which names it.
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _convert_ids(holder: dict[str, Any]) -> None:
    for name in _ID_FIELDS:
        value = holder.get(name)
        if not isinstance(value, str):
            continue
        try:
            holder[name] = base64.b64encode(bytes.fromhex(value)).decode()
        except ValueError:
            span = holder.get("name", "?")
            msg = f"span {span!r}: {name} {value!r} is not hex (OTLP/JSON ids are hex strings)"
            raise InvalidInput(msg) from None


def _spans_of(request: ExportTraceServiceRequest) -> list[Span]:
    return [
        _span(span)
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def _span(span: ProtoSpan) -> Span:
    for field, size in _ID_BYTES.items():
        value: bytes = getattr(span, field)
        if len(value) != size or not any(value):
            msg = (
                f"span {span.name!r} (trace {span.trace_id.hex()}):"
                f" {field} must be {size} bytes, not all zero"
            )
            raise InvalidInput(msg)
    if span.parent_span_id and len(span.parent_span_id) != _ID_BYTES["span_id"]:
        msg = f"span {span.name!r} ({span.span_id.hex()}): parent_span_id must be 8 bytes"
        raise InvalidInput(msg)
    return Span(
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=span.parent_span_id.hex(),
        name=span.name,
        start_unix_nano=span.start_time_unix_nano,
        end_unix_nano=span.end_time_unix_nano,
        error=span.status.code == Status.STATUS_CODE_ERROR,
        status_message=span.status.message,
        attributes=_attributes(span.attributes),
        events=tuple(
            SpanEvent(e.name, e.time_unix_nano, _attributes(e.attributes)) for e in span.events
        ),
    )


def _attributes(pairs: Iterable[KeyValue]) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {}
    for pair in pairs:
        value = _value(pair.value)
        if value is not None:
            attributes[pair.key] = value
    return attributes


def _value(value: AnyValue) -> AttributeValue | None:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [v for v in map(_value, value.array_value.values) if v is not None]
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    if which == "bytes_value":
        return value.bytes_value.hex()
    held: AttributeValue = getattr(value, which)
    return held
