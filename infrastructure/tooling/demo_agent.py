"""The demo's agent, written with the OpenAI Agents SDK (a framework we did not write), traced by
the maintained OpenInference instrumentation of that SDK into the OpenTelemetry SDK (`mace demo`;
the suite's agent of that framework too).

The agent has two function tools and a model of its own: it answers from a script (no network; a
tool call, then a final answer) and traces each call as the SDK's default model
(``OpenAIResponsesModel``) does, a response span holding the request's input and the whole
``Response``. Like most agents, it leaves the temperature at the provider's default, so its model
spans carry none. `run_as_recorded` and `run_changed` re-execute it against its recording
(``mace reexecute JOB --agent infrastructure.tooling.demo_agent:run_as_recorded``).

Imports the ``agents`` extra's packages: `mace demo` imports this module only when they are there.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from agents import Agent, Runner, function_tool
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import ModelResponse, TResponseInputItem, TResponseOutputItem
from agents.model_settings import ModelSettings
from agents.models.interface import Model, ModelTracing
from agents.tool import Tool
from agents.tracing import response_span
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openai.types.responses.response_prompt_param import ResponsePromptParam
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from infrastructure.application.ledger import Ledger
from infrastructure.application.openai_agents_replay import run_recorded
from infrastructure.application.otlp_decoding import spans_of_protobuf
from infrastructure.application.replay_harness import ReplayHarness
from infrastructure.application.trace_imports import TraceOutcome

MODEL_NAME = "gpt-4.1"
QUESTION = "What is the weather in Paris?"
ANSWER = "Sunny over Paris, and it is noon there."


@function_tool
def get_weather(city: str) -> str:
    """The sky over a city today."""
    return f"sunny over {city}"


@function_tool
def get_time(city: str) -> str:
    """The local time in a city."""
    return f"12:00 in {city}"


def weather_agent(model: Model) -> Agent[Any]:
    """The agent under test: its code, whichever model answers it."""
    return Agent(
        name="weather",
        instructions="Answer questions about the weather with your tools.",
        model=model,
        tools=[get_weather, get_time],
    )


def scripted_answers() -> list[list[TResponseOutputItem]]:
    """What the model answers, call by call: a tool call, then the final answer."""
    return [
        [
            ResponseFunctionToolCall(
                type="function_call",
                id="fc_1",
                call_id="call_1",
                name="get_weather",
                arguments='{"city":"Paris"}',
            )
        ],
        [
            ResponseOutputMessage(
                type="message",
                id="msg_1",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(type="output_text", text=ANSWER, annotations=[])],
            )
        ],
    ]


class ScriptedModel(Model):
    """Answers each call with the next scripted output, traced as the SDK's own models trace."""

    def __init__(self, answers: Sequence[list[TResponseOutputItem]]) -> None:
        self._answers = list(answers)

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        with response_span(disabled=tracing.is_disabled()) as span:
            output = self._answers.pop(0)
            response = Response(
                id=f"resp_{len(self._answers)}",
                created_at=0,
                model=MODEL_NAME,
                object="response",
                instructions=system_instructions,
                output=output,
                parallel_tool_calls=False,
                tool_choice="auto",
                tools=[],
                temperature=model_settings.temperature,
            )
            if tracing.include_data():
                span.span_data.response = response
                span.span_data.input = input
        return ModelResponse(output=output, usage=Usage(), response_id=response.id)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the agent under test runs without streaming")


@contextmanager
def instrumented(provider: TracerProvider) -> Iterator[None]:
    """The Agents SDK's traces go to ``provider`` (and nowhere else) through OpenInference."""
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()


def run_weather_agent(provider: TracerProvider, snapshots: Mapping[str, str]) -> str:
    """One traced run of the agent on its scripted model, its final answer.

    The service runs it inside a span of its own, as an application serving a request does: the
    SDK's trace becomes its child, and this root says what the instrumentation's spans cannot,
    the run's input and answer (OpenInference's ``input.value``, ``output.value``) and the
    snapshots the ledger holds for it (``mace.snapshot.<kind>``)."""
    with (
        instrumented(provider),
        provider.get_tracer("weather-service").start_as_current_span("weather request") as root,
    ):
        for kind, snapshot_id in snapshots.items():
            root.set_attribute(f"mace.snapshot.{kind}", snapshot_id)
        root.set_attribute("input.value", QUESTION)
        result = Runner.run_sync(weather_agent(ScriptedModel(scripted_answers())), QUESTION)
        answer: str = result.final_output
        root.set_attribute("output.value", answer)
    return answer


def otlp_export(snapshots: Mapping[str, str]) -> bytes:
    """One traced run of the agent (`run_weather_agent`), its spans encoded by the OTLP
    exporter's own encoder: the ``ExportTraceServiceRequest`` it would send to ``POST
    /v1/traces``."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    run_weather_agent(provider, snapshots)
    provider.shutdown()
    return encode_spans(exporter.get_finished_spans()).SerializeToString()


def record_through_otlp(ledger: Ledger, tenant: str) -> TraceOutcome:
    """One traced run of the agent, its OTLP export taken in by the intake ``POST /v1/traces``
    hands each request to (decoded, its spans held, the whole trace recorded as a run), in
    process and with no quiet period: the run is recorded as its export is taken in."""
    spans = spans_of_protobuf(otlp_export(ledger.snapshots.default_ids()))
    [outcome] = ledger.trace_intake.hold(spans, tenant, time.time(), 0).recorded
    return outcome


def run_as_recorded(harness: ReplayHarness, question: str) -> Any:
    """The agent's code as it was recorded, re-executed: its model is never asked."""
    return run_recorded(weather_agent(ScriptedModel([])), harness, question, model_id=MODEL_NAME)


@function_tool(name_override="get_weather")
def get_weather_in_units(city: str, units: str = "metric") -> str:
    """The sky over a city today, in the units asked for."""
    return f"sunny over {city} ({units})"


def run_changed(harness: ReplayHarness, question: str) -> Any:
    """The agent after a code change: ``get_weather`` now takes ``units`` (default metric), so
    the model's call reaches it with other arguments than the recorded run's."""
    agent = weather_agent(ScriptedModel([])).clone(tools=[get_weather_in_units, get_time])
    return run_recorded(agent, harness, question, model_id=MODEL_NAME)
