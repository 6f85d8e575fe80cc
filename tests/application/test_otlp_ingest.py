"""OpenTelemetry traces recorded as runs: each whole trace one job, on SQLite and PostgreSQL.

GenAI semantic conventions and OpenInference spans map to Run Event Schema v1 events; a trace
without its root, with a parent missing or a span not ended is not recorded; the same export
sent twice (in any span order) records one job; a bad span is refused, naming the span and the
attribute, and nothing is written.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from support.ledger_fixtures import store_of
from support.otlp_traces import CHAT, ROOT, TOOL, TRACE, agent_trace, export, span

from domain.trace_spans import SpanError
from infrastructure.application.ledger import Ledger
from infrastructure.application.otlp_decoding import spans_of_json
from infrastructure.application.trace_imports import TraceOutcome

pytestmark = pytest.mark.storage


def record(ledger: Ledger, raw: bytes, tenant: str = "acme") -> list[TraceOutcome]:
    return ledger.trace_imports.record_whole_traces(spans_of_json(raw), tenant)


def recorded(ledger: Ledger, outcome: TraceOutcome, tenant: str = "acme") -> list[dict[str, Any]]:
    """The job's recorded facts (type and payload), between its start and its completion."""
    assert outcome.log is not None
    stream = ledger.jobs.stream(outcome.log.job_id, tenant=tenant)
    return [
        {"type": e["event_type"], **e["payload"]}
        for e in stream
        if e["event_type"] not in {"JobStarted", "JobCompleted", "JobSealed"}
    ]


def position(ledger: Ledger) -> int:
    return store_of(ledger).recorder.max_notification_id() or 0


def test_a_genai_trace_with_content_is_one_job_of_full_io(ledger: Ledger) -> None:
    [outcome] = record(ledger, export(*agent_trace()))
    assert (outcome.trace_id, outcome.duplicate, outcome.incomplete) == (TRACE, False, None)
    assert outcome.log is not None
    assert outcome.log.capture_mode == "full_io"
    assert outcome.log.job_seed == TRACE
    assert outcome.log.job_input == "Weather in Paris?"
    events = recorded(ledger, outcome)
    assert [e["type"] for e in events] == [
        "ModelCallEnvelope",
        "ToolCall",
        "ToolResult",
    ]
    call, tool_call, tool_result = events
    assert (call["call_id"], call["model_id"], call["model_version"]) == (
        CHAT,
        "gpt-4o",
        "gpt-4o-2024-08-06",
    )
    assert (call["temperature"], call["seed"]) == (0.2, 42)
    assert call["prompt"][0]["parts"][0]["content"] == "Weather in Paris?"
    assert call["response"][0]["parts"][0]["content"] == "Sunny, 21C"
    assert (tool_call["call_id"], tool_call["tool"], tool_call["arguments"]) == (
        "call_1",
        "get_weather",
        {"city": "Paris"},
    )
    assert (tool_result["call_id"], tool_result["status"]) == ("call_1", "ok")
    assert tool_result["result"] == {"sky": "sunny", "celsius": 21}
    # Nothing of the model calls or tools is missing: only the snapshots the spans cannot declare.
    assert outcome.log.completion is not None
    assert outcome.log.completion.final_output == "Sunny, 21C"
    assert {m.event_type for m in outcome.log.completion.missing_artifacts} == {"JobStarted"}
    ledger.jobs.verify(outcome.log.job_id, tenant="acme")


def test_spans_without_content_record_none_and_say_what_is_missing(ledger: Ledger) -> None:
    [outcome] = record(ledger, export(*agent_trace(content=False)))
    assert outcome.log is not None and outcome.log.completion is not None
    assert outcome.log.capture_mode == "none"
    assert outcome.log.completion.replayable is False
    missing = {
        (m.event_type, m.step, tuple(m.missing))
        for m in outcome.log.completion.missing_artifacts
        if m.event_type != "JobStarted"
    }
    assert missing == {
        (
            "ModelCallEnvelope",
            f"model call {CHAT} (gpt-4o gpt-4o-2024-08-06)",
            ("prompt", "response"),
        ),
        ("ToolResult", "tool result call_1", ("result",)),
    }
    call, tool_call, _ = recorded(ledger, outcome)
    # The hashes kept name what the span did not carry: no content hashes to them.
    assert call["prompt"] is None and len(call["request_hash"]) == 64
    assert tool_call["arguments"] is None and len(tool_call["request_hash"]) == 64


def test_a_model_span_without_temperature_is_recorded_with_the_temperature_missing(
    ledger: Ledger,
) -> None:
    # OpenInference's spans of an agent that leaves the model's temperature at its default (the
    # OpenAI Agents SDK's, for one) carry no temperature: the call is recorded, never given one.
    llm = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4.1",
        "llm.invocation_parameters": '{"model": "gpt-4.1"}',
        "input.value": "What is MACE?",
        "output.value": "A flight recorder.",
    }
    raw = export(
        span(ROOT, "Agent workflow", {"openinference.span.kind": "AGENT"}, parent="", end=100),
        span(CHAT, "response", llm, start=2),
    )
    [outcome] = record(ledger, raw)
    [call] = recorded(ledger, outcome)
    assert (call["model_id"], call["temperature"]) == ("gpt-4.1", None)
    assert outcome.log is not None and outcome.log.completion is not None
    assert outcome.log.completion.replayable is False
    [missing] = [
        m for m in outcome.log.completion.missing_artifacts if m.event_type != "JobStarted"
    ]
    assert (missing.event_type, missing.step, missing.missing) == (
        "ModelCallEnvelope",
        f"model call {CHAT} (gpt-4.1 gpt-4.1)",
        ["temperature"],
    )
    assert (
        missing.reason == "the emitter recorded no temperature: the call's sampling is not pinned"
    )
    ledger.jobs.verify(outcome.log.job_id, tenant="acme")


def test_a_model_span_naming_no_model_is_recorded_with_the_model_missing(ledger: Ledger) -> None:
    # OpenInference's spans of an OpenAI Agents SDK agent traced without content name no model
    # (the model is read off the response the SDK leaves out): recorded, never given one.
    llm = {"openinference.span.kind": "LLM", "llm.invocation_parameters": '{"temperature": 0}'}
    raw = export(
        span(ROOT, "Agent workflow", {"openinference.span.kind": "AGENT"}, parent="", end=100),
        span(CHAT, "response", llm, start=2),
    )
    [outcome] = record(ledger, raw)
    [call] = recorded(ledger, outcome)
    assert (call["model_id"], call["model_version"], call["prompt"]) == (None, None, None)
    assert outcome.log is not None and outcome.log.completion is not None
    assert outcome.log.completion.replayable is False
    [missing] = [
        m
        for m in outcome.log.completion.missing_artifacts
        if m.event_type == "ModelCallEnvelope" and m.missing == ["model_id"]
    ]
    assert missing.step == f"model call {CHAT} (no model recorded)"
    assert missing.reason == "the emitter recorded no model id: which model answered is not known"
    ledger.jobs.verify(outcome.log.job_id, tenant="acme")


def test_the_same_export_twice_in_another_span_order_records_one_job(ledger: Ledger) -> None:
    spans = agent_trace()
    [first] = record(ledger, export(*spans))
    before = position(ledger)
    random.Random(7).shuffle(spans)
    [again] = record(ledger, export(*spans))
    # Sent twice within one export too: a span is held once.
    [thrice] = record(ledger, export(*spans, *spans))
    assert first.log is not None and again.log is not None and thrice.log is not None
    assert (again.duplicate, again.log.job_id) == (True, first.log.job_id)
    assert (thrice.duplicate, thrice.log.job_id) == (True, first.log.job_id)
    assert position(ledger) == before
    # Another tenant's same export is its own job.
    [theirs] = record(ledger, export(*spans), tenant="beta")
    assert theirs.duplicate is False


def test_openinference_spans_map_to_retrievals_gates_and_errors(ledger: Ledger) -> None:
    llm = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "claude-3-5-sonnet",
        "llm.invocation_parameters": '{"temperature": 0.0, "seed": 7}',
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "What is MACE?",
    }
    retriever = {
        "openinference.span.kind": "RETRIEVER",
        "input.value": "MACE ledger",
        "retrieval.documents.0.document.id": "doc-1",
        "retrieval.documents.0.document.score": 0.9,
        "retrieval.documents.0.document.content": "A flight recorder.",
    }
    tool = {"openinference.span.kind": "TOOL", "tool.name": "lookup", "input.value": '{"q": 1}'}
    guardrail = {"openinference.span.kind": "GUARDRAIL"}
    exception = {
        "name": "exception",
        "timeUnixNano": "1",
        "attributes": [
            {"key": "exception.type", "value": {"stringValue": "TimeoutError"}},
            {"key": "exception.message", "value": {"stringValue": "lookup timed out"}},
        ],
    }
    raw = export(
        span(ROOT, "agent", {"openinference.span.kind": "AGENT"}, parent="", end=100),
        span("00000000000000a1", "retrieve", retriever, start=1),
        span(CHAT, "llm", llm, start=2),
        span(TOOL, "lookup", tool, start=3, error="timed out", events=[exception]),
        span("00000000000000a2", "pii-check", guardrail, start=4, error="PII found"),
    )
    [outcome] = record(ledger, raw)
    events = recorded(ledger, outcome)
    assert [e["type"] for e in events] == [
        "RetrievalRequest",
        "RetrievalResponse",
        "ModelCallEnvelope",
        "ToolCall",
        "ToolResult",
        "ErrorEvent",
        "GateDecision",
        "ErrorEvent",
    ]
    request, response, call, _, result, error, gate, gate_error = events
    assert request["query"] == "MACE ledger"
    assert response["hits"] == [{"uri": "doc-1", "score": 0.9, "explain": {}}]
    assert (call["model_id"], call["temperature"], call["seed"]) == ("claude-3-5-sonnet", 0.0, 7)
    assert call["prompt"] == [{"message.role": "user", "message.content": "What is MACE?"}]
    assert outcome.log is not None and outcome.log.capture_mode == "prompts_only"
    assert (result["call_id"], result["status"]) == (TOOL, "error")
    assert (error["code"], error["message"]) == ("TimeoutError", "lookup timed out")
    assert (gate["gate"], gate["decision"], gate["reason"]) == ("pii-check", "deny", "PII found")
    assert (gate_error["code"], gate_error["message"]) == ("SPAN_STATUS_ERROR", "PII found")


@pytest.mark.parametrize(
    ("spans", "why"),
    [
        (agent_trace()[1:], "its root span (a span without a parent) has not arrived"),
        (
            [agent_trace()[0], span(CHAT, "chat", {}, parent="00000000000000ff")],
            f"the parent 00000000000000ff of span {TRACE}/{CHAT} ('chat') has not arrived",
        ),
        (
            [span(ROOT, "invoke_agent w", {}, parent="", end=None), *agent_trace()[1:]],
            f"span {TRACE}/{ROOT} ('invoke_agent w') has not ended",
        ),
    ],
    ids=["no-root", "parent-missing", "root-not-ended"],
)
def test_a_partial_trace_is_not_recorded(
    ledger: Ledger, spans: list[dict[str, Any]], why: str
) -> None:
    before = position(ledger)
    assert record(ledger, export(*spans)) == [TraceOutcome(TRACE, incomplete=why)]
    assert position(ledger) == before


def test_a_whole_trace_is_recorded_beside_a_partial_one(ledger: Ledger) -> None:
    other = "0af7651916cd43dd8448eb211c80319c"
    outcomes = record(ledger, export(*agent_trace(), *agent_trace(trace=other)[1:]))
    assert [(o.trace_id, o.log is not None) for o in outcomes] == [(other, False), (TRACE, True)]


def test_a_bad_span_is_refused_by_name_and_attribute_and_nothing_is_written(
    ledger: Ledger,
) -> None:
    root, chat, tool = agent_trace()
    cold = span(CHAT, "chat", {**_attributes(chat), "gen_ai.request.temperature": -1.0}, start=10)
    before = position(ledger)
    with pytest.raises(SpanError) as refused:
        # The whole trace beside it is not recorded either.
        record(
            ledger,
            export(*agent_trace(trace="0af7651916cd43dd8448eb211c80319c"), root, cold, tool),
        )
    assert str(refused.value) == (
        f"span {TRACE}/{CHAT} ('chat'): attribute gen_ai.request.temperature: Input should be"
        " greater than or equal to 0"
    )
    assert position(ledger) == before


def _attributes(made: dict[str, Any]) -> dict[str, Any]:
    """A span's attributes back from its OTLP/JSON form (strings and numbers only)."""
    values: dict[str, Any] = {}
    for pair in made["attributes"]:
        [(kind, value)] = pair["value"].items()
        values[pair["key"]] = int(value) if kind == "intValue" else value
    return values


def test_the_root_span_declares_the_runs_snapshots(ledger: Ledger) -> None:
    declared = ledger.snapshots.default_ids()
    root, chat, tool = agent_trace()
    named = {f"mace.snapshot.{kind}": snapshot_id for kind, snapshot_id in declared.items()}
    with_snapshots = span(
        ROOT, "invoke_agent w", {**_attributes(root), **named}, parent="", end=100
    )
    [outcome] = record(ledger, export(with_snapshots, chat, tool))
    assert outcome.log is not None and outcome.log.completion is not None
    assert outcome.log.snapshot_ids == {f"{k}_snapshot_id": v for k, v in declared.items()}
    assert outcome.log.completion.missing_artifacts == []
    assert outcome.log.completion.replayable is True

    unknown = span(ROOT, "invoke_agent w", {"mace.snapshot.weather": "0" * 64}, parent="", end=9)
    with pytest.raises(
        SpanError,
        match=r"attribute mace.snapshot.weather: no snapshot kind 'weather': one of selfrep,",
    ):
        record(ledger, export(unknown))
