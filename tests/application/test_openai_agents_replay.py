"""An OpenAI Agents SDK agent (tests/support/agents_sdk.py), recorded from the spans OpenInference's
instrumentation made of it, re-executed against its recording through the harness: unchanged it
asks for exactly what the run asked for (authoritative); after a change that calls a tool with
other arguments it diverges at that call. On SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, function_tool
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support.agents_sdk import (
    ANSWER,
    MODEL_NAME,
    QUESTION,
    ScriptedModel,
    get_time,
    run_weather_agent,
    weather_agent,
)
from support.otel_sdk import protobuf_export, provider_exporting_to

from domain.errors import ErrorCode
from domain.governance import Actor
from infrastructure.application.ledger import Ledger
from infrastructure.application.openai_agents_replay import run_recorded
from infrastructure.application.otlp_decoding import spans_of_protobuf
from infrastructure.application.replay_harness import replay_harness
from projections.reexecution import ReplayDiverged

pytestmark = pytest.mark.storage

AUDITOR = Actor.of("aude", ["auditor"])


def recorded_job(ledger: Ledger) -> str:
    """The agent's run, traced as it runs and recorded from its spans (tenant acme)."""
    exporter = InMemorySpanExporter()
    provider = provider_exporting_to(exporter)
    assert run_weather_agent(provider, ledger.snapshots.default_ids()) == ANSWER
    provider.shutdown()
    spans = spans_of_protobuf(protobuf_export(exporter.get_finished_spans()))
    [outcome] = ledger.trace_imports.record_whole_traces(spans, "acme")
    assert outcome.log is not None
    return outcome.log.job_id


def the_agent() -> Agent[Any]:
    """The agent's code as it was recorded; re-executed, its model is never asked."""
    return weather_agent(ScriptedModel([]))


def test_the_agent_unchanged_re_executes_with_an_authoritative_match(ledger: Ledger) -> None:
    job_id = recorded_job(ledger)
    with replay_harness(ledger.recordings, job_id, AUDITOR, tenant="acme") as h:
        h.final_output(run_recorded(the_agent(), h, QUESTION, model_id=MODEL_NAME))
    assert h.result is not None
    outcome = h.result.outcome
    assert (outcome.ok, outcome.authoritative, outcome.error_code) == (True, True, None)
    # Two model calls and one tool call, each re-made and answered from the recording.
    assert [c.check.value for c in outcome.checks if c.sequence_index is not None] == [
        "reexecuted"
    ] * 3


@function_tool
def get_weather(city: str, units: str = "metric") -> str:
    """The sky over a city today (now in the units asked for)."""
    return f"sunny over {city} ({units})"


def test_a_change_that_calls_a_tool_with_other_arguments_diverges_at_that_call(
    ledger: Ledger,
) -> None:
    job_id = recorded_job(ledger)
    changed = the_agent().clone(tools=[get_weather, get_time])
    with (
        pytest.raises(ReplayDiverged) as raised,
        replay_harness(ledger.recordings, job_id, AUDITOR, tenant="acme") as h,
    ):
        run_recorded(changed, h, QUESTION, model_id=MODEL_NAME)
    divergence = raised.value.divergence
    assert raised.value.code is ErrorCode.REPLAY_DIVERGENCE
    assert (divergence.iteration, divergence.field) == (1, "tool_call.arguments")
    assert (divergence.recorded, divergence.replayed) == (
        {"city": "Paris"},
        {"city": "Paris", "units": "metric"},
    )
    assert h.result is not None
    assert (h.result.outcome.ok, h.result.outcome.error_code) == (False, "REPLAY_DIVERGENCE")
