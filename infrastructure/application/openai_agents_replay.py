"""An OpenAI Agents SDK agent re-executed, unchanged, against its recording (docs/reexecution.md).

    with replay_harness(ledger.recordings, job_id, actor) as h:
        answer = run_recorded(my_agent, h, question, model_id="gpt-4.1")
        h.final_output(answer)

The agent's model becomes `RecordedModel` (each call answered by ``h.model_call`` with the
request's input items, as OpenInference's spans of the SDK record them) and each function tool
a wrapper answered by ``h.tool_call`` with the arguments the tool's current code would be called
with. Its instructions, tools' schemas, hooks and run loop are the agent's own.

Optional: this module imports ``agents`` (the ``openai-agents`` distribution), which the ledger's
runtime never needs; nothing else in the ledger imports this module. Only a team that re-executes
an Agents SDK agent imports it, with that SDK installed beside the ledger.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import orjson
from agents import Agent, FunctionTool, RunConfig, Runner
from agents.agent_output import AgentOutputSchemaBase
from agents.exceptions import AgentsException
from agents.function_schema import function_schema
from agents.handoffs import Handoff
from agents.items import ModelResponse, TResponseInputItem, TResponseOutputItem
from agents.model_settings import ModelSettings
from agents.models.interface import Model, ModelTracing
from agents.tool import Tool
from agents.tool_context import ToolContext
from agents.usage import Usage
from openai.types.responses.response_prompt_param import ResponsePromptParam
from pydantic import JsonValue, TypeAdapter
from pydantic_core import to_jsonable_python

from domain.errors import InvalidInput, MaceError
from infrastructure.application.replay_harness import ReplayHarness

_OUTPUT_ITEM: TypeAdapter[TResponseOutputItem] = TypeAdapter(TResponseOutputItem)


def _without_nulls(value: Any) -> Any:
    # A span holds the whole dump of each output item, unset fields as null; the SDK sends an
    # item back to the model with its set fields only, so restoring the nulls as set would make
    # the next call's input differ from the recorded one.
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def output_items(response: JsonValue) -> list[TResponseOutputItem]:
    """The output items of a recorded response: a Responses API ``Response`` (the SDK's default
    model's span) or the list of its items."""
    items = response.get("output") if isinstance(response, dict) else response
    if not isinstance(items, list):
        msg = "a recorded model response is a Response or a list of its output items"
        raise InvalidInput(msg)
    return [_OUTPUT_ITEM.validate_python(_without_nulls(item)) for item in items]


class RecordedModel(Model):
    """The agent's model, answered from the recording: its next model call must be to
    ``model_id`` with the same input items, else `ReplayDiverged`."""

    def __init__(self, harness: ReplayHarness, model_id: str) -> None:
        self._harness = harness
        self._model_id = model_id

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
        recorded = self._harness.model_call(self._model_id, to_jsonable_python(input))
        response_id = recorded.get("id") if isinstance(recorded, dict) else None
        return ModelResponse(output=output_items(recorded), usage=Usage(), response_id=response_id)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise InvalidInput("re-execution runs the agent without streaming (Runner.run)")


def _arguments(tool: FunctionTool, raw: str) -> JsonValue:
    """The arguments the tool's current code is called with: the model's JSON as the tool's
    signature reads it (defaults filled in), so a changed signature calls it with other ones."""
    try:
        parameters = function_schema(tool.__wrapped__).params_pydantic_model
    except AttributeError:  # not made by `function_tool`: its input is the model's JSON
        decoded: JsonValue = orjson.loads(raw or "{}")
        return decoded
    dumped: JsonValue = parameters.model_validate_json(raw or "{}").model_dump(mode="json")
    return dumped


def recorded_tool(tool: Tool, harness: ReplayHarness) -> FunctionTool:
    """``tool`` answered from the recording: its next call must be to this tool with these
    arguments, else `ReplayDiverged`. Only function tools: a hosted tool runs at the provider,
    where nothing can answer it from a recording."""
    if not isinstance(tool, FunctionTool):
        msg = f"tool {tool.name!r} is not a function tool: only function tools re-execute"
        raise InvalidInput(msg)

    async def answer(context: ToolContext[Any], raw: str) -> Any:
        return harness.tool_call(tool.name, _arguments(tool, raw))

    return dataclasses.replace(tool, on_invoke_tool=answer)


def reexecutable(agent: Agent[Any], harness: ReplayHarness, model_id: str) -> Agent[Any]:
    """``agent`` with its model and function tools answered from the recording."""
    tools = [recorded_tool(tool, harness) for tool in agent.tools]
    return agent.clone(model=RecordedModel(harness, model_id), tools=tools)


def run_recorded(agent: Agent[Any], harness: ReplayHarness, input: str, model_id: str) -> Any:
    """Run ``agent`` re-executed (`reexecutable`) on ``input``; its final output.

    The SDK wraps what a tool raises in its own error: the harness's own (a divergence, a
    refusal) is raised as it is. The SDK's tracing is off: a re-execution has no live
    dependencies, and sends no trace anywhere."""
    config = RunConfig(tracing_disabled=True)
    try:
        result = Runner.run_sync(reexecutable(agent, harness, model_id), input, run_config=config)
    except AgentsException as wrapped:
        cause = wrapped.__cause__
        if isinstance(cause, MaceError):
            raise cause from None
        raise
    return result.final_output
