"""OTLP decoded with the protocol's own messages: the SDK's protobuf export and the same export in
OTLP/JSON (hex ids, not the JSON mapping's base64) give the same spans."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from support.otel_sdk import recorded_spans

from domain.errors import InvalidInput
from infrastructure.application.otlp_decoding import spans_of_json, spans_of_protobuf


def as_otlp_json(request: dict[str, Any]) -> bytes:
    """The JSON mapping's form of a request, with its ids hex as OTLP/JSON writes them."""
    for resource in request["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for name in ("traceId", "spanId", "parentSpanId"):
                    if name in span:
                        span[name] = base64.b64decode(span[name]).hex()
    return orjson.dumps(request)


def test_protobuf_and_otlp_json_give_the_same_spans() -> None:
    request = encode_spans(recorded_spans())
    from_protobuf = spans_of_protobuf(request.SerializeToString())
    from_json = spans_of_json(as_otlp_json(MessageToDict(request)))
    assert from_json == from_protobuf
    assert [s.name for s in from_protobuf] == [
        "chat gpt-4o",
        "execute_tool get_weather",
        "invoke_agent weather",
    ]
    chat, _, root = from_protobuf
    assert (chat.parent_span_id, root.parent_span_id) == (root.span_id, "")
    assert chat.attributes["gen_ai.request.temperature"] == 0.0
    assert chat.attributes["gen_ai.request.seed"] == 7


def test_a_key_given_twice_is_refused_as_every_json_input_is() -> None:
    with pytest.raises(InvalidInput, match="resourceSpans"):
        spans_of_json(b'{"resourceSpans": [], "resourceSpans": []}')
