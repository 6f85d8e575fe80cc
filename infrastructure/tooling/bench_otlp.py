"""The bench's ``otlp spans`` figure: agents' traces exported over OTLP/HTTP as an SDK sends them.

``mace serve`` runs over the bench's store in its own process (`load_server.ServiceProcess`), with
``MACE_TRACE_QUIET_SECONDS=0``: a whole trace is recorded as its last span arrives, in the request
that brings it, so that the figure times the recording and not a quiet period. Each trace is an
agent's (`agent_spans`): an ``invoke_agent`` root, a ``chat`` call asking for a tool, the
``execute_tool`` span, a ``chat`` call answering, in the GenAI semantic conventions with content.
The spans are sent as an SDK's batch processor sends them: in the order they end (children
first, the root last), `SPANS_A_REQUEST` a protobuf ``ExportTraceServiceRequest`` (built with
`opentelemetry-proto` before the clock starts); with a batch that is not a multiple of
`SPANS_A_TRACE`, some traces' spans come in two requests.

The figure is the spans recorded a second, from the first request to the last answer, and the
processor time of the client and the service meanwhile. Its raw baseline (``--compare-raw``)
inserts the rows the service stored with plain INSERTs in as many commits as the service made
(`OtlpPlan.commits`).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import httpx
import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.tooling.bench_http import HttpRunsError, Served, served

SPANS_A_TRACE: Final = 4
"""An agent's trace: the root, a chat asking for a tool, the tool, a chat answering."""
SPANS_A_REQUEST: Final = 100
"""Spans an export request carries at most (an SDK's batch processor sends up to 512)."""
PROTOBUF: Final = "application/x-protobuf"
START_NANO: Final = 1_700_000_000_000_000_000
MS: Final = 1_000_000


def _value(value: str | int | float) -> AnyValue:
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    return AnyValue(double_value=value)


def _span(
    trace: bytes,
    span_id: bytes,
    parent: bytes,
    name: str,
    at: tuple[int, int],
    attributes: Mapping[str, str | int | float],
) -> Span:
    start, end = at
    return Span(
        trace_id=trace,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        kind=Span.SPAN_KIND_INTERNAL if not parent else Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=START_NANO + start * MS,
        end_time_unix_nano=START_NANO + end * MS,
        attributes=[KeyValue(key=k, value=_value(v)) for k, v in attributes.items()],
        status=Status(code=Status.STATUS_CODE_OK),
    )


def _messages(role: str, kind: str, **part: str) -> str:
    return orjson.dumps([{"role": role, "parts": [{"type": kind, **part}]}]).decode()


def agent_spans(trace: bytes, n: int, snapshots: Mapping[str, str]) -> list[Span]:
    """Agent run ``n``'s spans, in the order they end (as an exporter gets them); its root
    declares ``snapshots`` (``mace.snapshot.<kind>``)."""
    city = f"city {n}"
    root, ask, tool, answer = (trace[:7] + bytes([k]) for k in range(1, 5))
    call = f"call_{n}"
    chat: dict[str, str | int | float] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.request.temperature": 0.0,
        "gen_ai.request.seed": n,
    }
    question = _messages("user", "text", content=f"Weather in {city}?")
    told = f"Sunny in {city}, 21C"
    return [
        _span(
            trace,
            ask,
            root,
            "chat gpt-4o",
            (10, 20),
            {
                **chat,
                "gen_ai.input.messages": question,
                "gen_ai.output.messages": _messages(
                    "assistant", "tool_call", id=call, name="get_weather"
                ),
            },
        ),
        _span(
            trace,
            tool,
            root,
            "execute_tool get_weather",
            (30, 40),
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": call,
                "gen_ai.tool.call.arguments": orjson.dumps({"city": city}).decode(),
                "gen_ai.tool.call.result": '{"sky": "sunny", "celsius": 21}',
            },
        ),
        _span(
            trace,
            answer,
            root,
            "chat gpt-4o",
            (50, 60),
            {
                **chat,
                "gen_ai.input.messages": question,
                "gen_ai.output.messages": _messages("assistant", "text", content=told),
            },
        ),
        _span(
            trace,
            root,
            b"",
            "invoke_agent weather",
            (0, 70),
            {
                **{f"mace.snapshot.{kind}": sid for kind, sid in snapshots.items()},
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "weather",
                "gen_ai.input.messages": f"Weather in {city}?",
                "gen_ai.output.messages": told,
            },
        ),
    ]


def _export(spans: list[Span]) -> bytes:
    resource = Resource(attributes=[KeyValue(key="service.name", value=_value("bench-agent"))])
    scope = InstrumentationScope(name="bench-agent")
    request = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(resource=resource, scope_spans=[ScopeSpans(scope=scope, spans=spans)])
        ]
    )
    return request.SerializeToString()


@dataclass(frozen=True, slots=True)
class OtlpPlan:
    """The export requests of ``spans`` spans (``spans / SPANS_A_TRACE`` traces), serialized,
    and the commits the service makes taking them in: one a trace a request that brings its
    spans (held, signed), and two a trace once whole (recorded as a run, then closed)."""

    spans: int
    traces: int
    bodies: tuple[bytes, ...]
    commits: int


def plan_exports(spans: int, snapshots: Mapping[str, str], batch: int) -> OtlpPlan:
    """``spans`` spans of agent traces (a multiple of `SPANS_A_TRACE`) on fresh trace ids, in
    requests of ``batch`` spans."""
    tag = secrets.token_bytes(8)
    ended = [
        span
        for n in range(spans // SPANS_A_TRACE)
        for span in agent_spans(tag + n.to_bytes(8, "big"), n, snapshots)
    ]
    groups = [ended[at : at + batch] for at in range(0, len(ended), batch)]
    held = sum(len({span.trace_id for span in group}) for group in groups)
    traces = len(ended) // SPANS_A_TRACE
    return OtlpPlan(len(ended), traces, tuple(map(_export, groups)), held + 2 * traces)


def otlp_spans(ledger: Ledger, settings: Settings, spans: int) -> Served:
    """Send ``spans`` spans of agent traces to the service (quiet period 0); every span must
    be taken."""
    batch = min(SPANS_A_REQUEST, settings.max_batch_events)
    plan = plan_exports(spans, ledger.snapshots.default_ids(), batch)

    def send(client: httpx.Client) -> tuple[int, int]:
        for body in plan.bodies:
            _export_to(client, body)
        return plan.spans, plan.commits

    return served(ledger, settings, send, PROTOBUF, {"MACE_TRACE_QUIET_SECONDS": "0"})


def _export_to(client: httpx.Client, body: bytes) -> None:
    answer = client.post("/v1/traces", content=body)
    if answer.status_code != 200:
        text = " ".join(answer.text.split())[:200]
        msg = f"POST /v1/traces answered {answer.status_code}, not 200: {text}"
        raise HttpRunsError(msg)
    said = ExportTraceServiceResponse.FromString(answer.content).partial_success
    if said.rejected_spans:
        msg = f"POST /v1/traces rejected {said.rejected_spans} span(s): {said.error_message}"
        raise HttpRunsError(msg)
