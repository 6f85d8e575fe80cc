"""``POST /v1/traces``: OTLP/HTTP as the specification answers it, spans held per tenant and trace
in the ledger, each trace recorded once whole and quiet, never when partial. Both stores."""

from __future__ import annotations

import gzip
import logging
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from support.api_support import Response, auth, token_book
from support.ledger_fixtures import RawTable, store_of
from support.otel_sdk import protobuf_export, recorded_spans
from support.otlp_traces import CHAT, TOOL, TRACE, agent_trace, export, span

from infrastructure.api.app import create_app
from infrastructure.application.ledger import Ledger
from infrastructure.application.trace_intake import TraceCloser
from infrastructure.storage.settings import Settings
from projections.job_search import JobQuery

pytestmark = pytest.mark.storage
PROTOBUF = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def quiet_at_once(settings: Settings, ledger: Ledger) -> Iterator[TestClient]:
    """The service recording a whole trace as soon as its last span arrives (quiet period 0)."""
    at_once = settings.model_copy(update={"trace_quiet_seconds": 0.0, "max_batch_events": 20})
    with TestClient(create_app(at_once, token_book(), ledger)) as client:
        yield client


def post(
    client: TestClient, body: bytes, headers: dict[str, str], who: str = "operator"
) -> Response:
    response: Response = client.post("/v1/traces", content=body, headers={**headers, **auth(who)})
    return response


def answered(response: Response) -> ExportTraceServiceResponse:
    assert response.status_code == 200, response.content
    assert response.headers["content-type"] == "application/x-protobuf"
    answer = ExportTraceServiceResponse()
    answer.ParseFromString(response.content)
    return answer


def job_ids(ledger: Ledger, tenant: str = "acme") -> list[str]:
    return [row["job_id"] for row in ledger.read_models.jobs(JobQuery(tenant))["jobs"]]


def position(ledger: Ledger) -> int:
    return store_of(ledger).recorder.max_notification_id() or 0


def test_spans_over_several_requests_out_of_order_are_one_run(
    quiet_at_once: TestClient, ledger: Ledger
) -> None:
    chat, tool, root = recorded_spans()  # as the SDK ends them: children first
    # Without its root the trace is not whole: nothing is recorded, whatever the quiet period.
    assert not answered(post(quiet_at_once, protobuf_export([tool]), PROTOBUF)).HasField(
        "partial_success"
    )
    answered(post(quiet_at_once, protobuf_export([chat]), PROTOBUF))
    assert job_ids(ledger) == []
    # Sent again: held once, nothing written.
    before = position(ledger)
    answered(post(quiet_at_once, protobuf_export([tool, chat]), PROTOBUF))
    assert position(ledger) == before
    zipped = gzip.compress(protobuf_export([root]))
    answered(post(quiet_at_once, zipped, {**PROTOBUF, "Content-Encoding": "gzip"}))
    [job_id] = job_ids(ledger)
    log = ledger.jobs.reflective_log(job_id, tenant="acme")
    assert (log.capture_mode, log.job_input) == ("full_io", "Weather in Paris?")
    events = [e["event_type"] for e in ledger.jobs.stream(job_id, tenant="acme")]
    assert events[1:4] == ["ModelCallEnvelope", "ToolCall", "ToolResult"]
    # A span of the recorded trace sent again changes nothing; another tenant's is its own.
    before = position(ledger)
    answered(post(quiet_at_once, protobuf_export([chat, tool, root]), PROTOBUF))
    assert position(ledger) == before
    answered(post(quiet_at_once, protobuf_export([chat, tool, root]), PROTOBUF, "beta_operator"))
    assert len(job_ids(ledger, "beta")) == 1
    assert job_ids(ledger) == [job_id]


def test_a_bad_span_is_rejected_in_partial_success_and_the_rest_held(
    quiet_at_once: TestClient, ledger: Ledger
) -> None:
    root, chat, tool = agent_trace()
    cold = span(
        CHAT,
        "chat",
        {"gen_ai.operation.name": "chat", "gen_ai.request.temperature": -1.0},
        start=10,
    )
    response = post(quiet_at_once, export(cold, tool), JSON)
    assert (response.status_code, response.headers["content-type"]) == (200, "application/json")
    assert response.json() == {
        "partialSuccess": {
            "rejectedSpans": "1",
            "errorMessage": f"span {TRACE}/{CHAT} ('chat'): attribute gen_ai.request.temperature:"
            " Input should be greater than or equal to 0",
        }
    }
    assert post(quiet_at_once, export(root, chat), JSON).json() == {}
    [job_id] = job_ids(ledger)
    events = [e["event_type"] for e in ledger.jobs.stream(job_id, tenant="acme")]
    assert events[1:4] == ["ModelCallEnvelope", "ToolCall", "ToolResult"]


def test_a_trace_whole_but_for_a_refused_span_is_never_recorded_without_it(
    quiet_at_once: TestClient, ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    """The span refused is a leaf: the spans held make a whole trace, and recording them would
    record a run that lacks a call the agent made. The trace is closed as refused instead."""
    root, _, tool = agent_trace()
    cold = span(
        CHAT,
        "chat",
        {"gen_ai.operation.name": "chat", "gen_ai.request.temperature": -1.0},
        start=10,
    )
    with caplog.at_level(logging.WARNING, logger="mace.traces"):
        answer = post(quiet_at_once, export(root, cold, tool), JSON).json()
    assert answer["partialSuccess"]["rejectedSpans"] == "1"
    assert job_ids(ledger) == []
    assert f"trace {TRACE} not recorded: a span was refused: span {TRACE}/{CHAT}" in caplog.text
    # Closed for good: the span sent again as it should have been is refused, nothing recorded.
    _, chat, _ = agent_trace()
    late = post(quiet_at_once, export(chat), JSON).json()
    assert "recorded or refused already" in late["partialSuccess"]["errorMessage"]
    assert job_ids(ledger) == []


def test_a_partial_trace_is_never_recorded(quiet_at_once: TestClient, ledger: Ledger) -> None:
    root, chat, tool = agent_trace()
    orphan = span("00000000000000aa", "chat", {}, parent="00000000000000ff", start=50)
    answered(post(quiet_at_once, protobuf_export(recorded_spans()[:2]), PROTOBUF))
    post(quiet_at_once, export(root, chat, tool, orphan), JSON)
    not_ended = span("00000000000000bb", "late", {}, start=60, end=None, trace=TRACE)
    post(quiet_at_once, export(not_ended), JSON)
    assert ledger.trace_intake.close_quiet(now=4e9, quiet=0.0) == []
    assert job_ids(ledger) == []


def test_a_whole_trace_waits_for_its_quiet_period(settings: Settings, ledger: Ledger) -> None:
    with TestClient(create_app(settings, token_book(), ledger)) as client:
        answered(post(client, protobuf_export(recorded_spans()), PROTOBUF))
    assert job_ids(ledger) == []  # the default quiet period (5 s) has not passed
    [held] = ledger.trace_intake.close_quiet(now=4e9, quiet=settings.trace_quiet_seconds)
    assert held.log is not None and job_ids(ledger) == [held.log.job_id]
    # A service started later finds what is held open by scanning the log; this one is closed.
    fresh = Ledger.open(settings)
    with fresh:
        fresh.trace_intake.scan()
        assert fresh.trace_intake.close_quiet(now=4e9, quiet=0.0) == []


@pytest.mark.parametrize(
    ("headers", "body", "status", "said"),
    [
        ({"Content-Type": "text/plain"}, b"x", 415, "content type text/plain: expected"),
        ({**PROTOBUF, "Content-Encoding": "br"}, b"x", 415, "content encoding br: expected gzip"),
        (PROTOBUF, b"\xff\xff\xff", 400, "not an OTLP ExportTraceServiceRequest in protobuf"),
        ({**PROTOBUF, "Content-Encoding": "gzip"}, b"not gzip", 400, "the body is not gzip"),
        (
            {**JSON, "Content-Encoding": "gzip"},
            gzip.compress(b" " * 2_000_000),
            413,
            "(MACE_MAX_BODY_BYTES) inflated",
        ),
        (
            PROTOBUF,
            protobuf_export(recorded_spans() * 7),
            413,
            "batch of 21 events: at most 20 (MACE_MAX_BATCH_EVENTS)",
        ),
    ],
    ids=["content-type", "encoding", "not-protobuf", "not-gzip", "gzip-bomb", "too-many-spans"],
)
def test_refusals_answer_as_otlp_says_and_write_nothing(
    quiet_at_once: TestClient,
    ledger: Ledger,
    headers: dict[str, str],
    body: bytes,
    status: int,
    said: str,
) -> None:
    before = position(ledger)
    response = post(quiet_at_once, body, headers)
    assert response.status_code == status
    refusal = Status()
    if response.headers["content-type"] == "application/x-protobuf":
        refusal.ParseFromString(response.content)
        message = refusal.message
    else:
        message = response.json()["message"]
    assert said in message
    assert position(ledger) == before


def test_no_token_no_spans(quiet_at_once: TestClient, ledger: Ledger) -> None:
    response = quiet_at_once.post("/v1/traces", content=export(*agent_trace()), headers=JSON)
    assert response.status_code == 401
    auditor = post(quiet_at_once, export(*agent_trace()), JSON, "auditor")
    assert auditor.status_code == 403
    assert job_ids(ledger) == []


def test_the_closer_records_a_quiet_trace_and_closes_an_unrecordable_one_for_good(
    settings: Settings, ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    other = "0af7651916cd43dd8448eb211c80319c"
    root, chat, tool = agent_trace(trace=other)
    again = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": "call_1",  # the id of the tool call before it
    }
    twice = span("00000000000000cc", "execute_tool again", again, start=50, end=60, trace=other)
    with TestClient(create_app(settings, token_book(), ledger)) as client:
        answered(post(client, protobuf_export(recorded_spans()), PROTOBUF))
        assert post(client, export(root, chat, tool, twice), JSON).json() == {}
    clock = iter([1.0, 4e9])
    closer = TraceCloser(ledger.trace_intake, 5.0, 1.0, lambda: next(clock))
    closer.tick()  # 1 s after the epoch: the spans arrived later, so it is not quiet yet
    assert job_ids(ledger) == []
    with caplog.at_level(logging.WARNING, logger="mace.traces"):
        closer.tick()
    assert len(job_ids(ledger)) == 1
    said = f"trace {other} not recorded: span {other}/00000000000000cc"
    assert said in caplog.text
    # Closed as refused: no later round tries it again.
    before = position(ledger)
    assert ledger.trace_intake.close_quiet(now=4e9, quiet=0.0) == []
    assert position(ledger) == before


def test_a_span_holding_a_secret_in_clear_is_rejected_and_never_stored(
    quiet_at_once: TestClient, settings: Settings, ledger: Ledger
) -> None:
    root, chat, _ = agent_trace()
    secret = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "login",
        "gen_ai.tool.call.arguments": '{"user": "olga", "password": "hunter2"}',
    }
    leaking = span(TOOL, "execute_tool login", secret, start=30, end=40)
    before = position(ledger)
    response = post(quiet_at_once, export(chat, leaking), JSON)
    rejected = response.json()["partialSuccess"]
    assert rejected["rejectedSpans"] == "1"
    assert rejected["errorMessage"].startswith(f"span {TRACE}/{TOOL} ('execute_tool login'): ")
    assert "privacy rules never let the ledger keep in clear" in rejected["errorMessage"]
    assert "hunter2" not in rejected["errorMessage"]
    rows = RawTable(settings).execute("SELECT state FROM {table}")
    assert position(ledger) > before  # the chat span is held
    assert not any(b"hunter2" in bytes(state) for (state,) in rows)
    # Whole once its root comes, but for the tool call refused: never recorded without it.
    post(quiet_at_once, export(root), JSON)
    assert job_ids(ledger) == []
    rows = RawTable(settings).execute("SELECT state FROM {table}")
    assert not any(b"hunter2" in bytes(state) for (state,) in rows)
