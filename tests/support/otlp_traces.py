"""OTLP/JSON trace exports (``ExportTraceServiceRequest``) as exporters write them, for tests.

Ids are hex, times are nanosecond strings, attributes are ``{"key", "value": AnyValue}``: the
OTLP/JSON encoding, not protobuf's plain JSON mapping.
"""

from __future__ import annotations

from typing import Any

import orjson

TRACE = "5b8efff798038103d269b633813fc60c"
ROOT, CHAT, TOOL = "eee19b7ec3c1b174", "eee19b7ec3c1b175", "eee19b7ec3c1b176"
START = 1_700_000_000_000_000_000


def any_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    return {"stringValue": value}


def span(
    span_id: str,
    name: str,
    attributes: dict[str, Any],
    *,
    parent: str = ROOT,
    start: int = 0,
    end: int | None = 10,
    trace: str = TRACE,
    error: str | None = None,
    events: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One span; ``start``/``end`` in milliseconds after `START` (``end=None``: not ended)."""
    made: dict[str, Any] = {
        "traceId": trace,
        "spanId": span_id,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(START + start * 1_000_000),
        "endTimeUnixNano": "0" if end is None else str(START + end * 1_000_000),
        "attributes": [{"key": k, "value": any_value(v)} for k, v in attributes.items()],
        "events": events or [],
        "status": {"code": 2, "message": error} if error is not None else {},
    }
    if parent:
        made["parentSpanId"] = parent
    return made


def export(*spans: dict[str, Any]) -> bytes:
    request = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": any_value("agent")}]},
                "scopeSpans": [{"scope": {"name": "test-agent"}, "spans": list(spans)}],
            }
        ]
    }
    return orjson.dumps(request)


def agent_trace(*, content: bool = True, trace: str = TRACE) -> list[dict[str, Any]]:
    """An ``invoke_agent`` root, a ``chat`` call asking for a tool, the ``execute_tool`` span,
    in the GenAI semantic conventions; with ``content``, the messages, arguments and result."""
    question = [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]
    answer = [{"role": "assistant", "parts": [{"type": "text", "content": "Sunny, 21C"}]}]
    chat: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.seed": 42,
    }
    tool: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": "call_1",
    }
    root: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "w"}
    if content:
        chat["gen_ai.input.messages"] = orjson.dumps(question).decode()
        chat["gen_ai.output.messages"] = orjson.dumps(answer).decode()
        tool["gen_ai.tool.call.arguments"] = '{"city": "Paris"}'
        tool["gen_ai.tool.call.result"] = '{"sky": "sunny", "celsius": 21}'
        root["gen_ai.input.messages"] = "Weather in Paris?"
        root["gen_ai.output.messages"] = "Sunny, 21C"
    return [
        span(ROOT, "invoke_agent w", root, parent="", start=0, end=100, trace=trace),
        span(CHAT, "chat gpt-4o", chat, start=10, end=20, trace=trace),
        span(TOOL, "execute_tool get_weather", tool, start=30, end=40, trace=trace),
    ]
