"""An agent written with the OpenAI Agents SDK (a framework we did not write), traced by the
maintained OpenInference instrumentation of that SDK into the OpenTelemetry SDK.

The agent has two function tools and a model of the test's own: it answers from a script (no
network; a tool call, then a final answer) and traces each call as the SDK's default model
(``OpenAIResponsesModel``) does, a response span holding the request's input and the whole
``Response``. Like most agents, it leaves the temperature at the provider's default, so its model
spans carry none.
"""

from __future__ import annotations

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
from opentelemetry.sdk.trace import TracerProvider

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
