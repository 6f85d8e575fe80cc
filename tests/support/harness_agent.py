"""The test agent's (`ticket_agent`) live boundary while it is recorded with `RunRecorder`, and
its run on ticket 42 recorded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.events import (
    ModelCallEnvelope,
    RetrievalHit,
    RetrievalRequest,
    RetrievalResponse,
    RunStarted,
    ToolCall,
    ToolResult,
    hash_of,
)
from infrastructure.application.ledger import Ledger
from infrastructure.application.run_recorder import RunRecorder
from support.ticket_agent import agent

SCHEMA = hash_of({"q": "string"})
PROMPT_BUNDLE = hash_of("support-agent prompts v3")


LIVE: dict[str, Callable[[Any], Any]] = {
    "search": lambda arguments: {"first": f"doc-{arguments['q']}", "total": 2},
    "fetch": lambda arguments: {"title": f"Title of {arguments['id']}"},
}


class RecordingBoundary:
    """The agent's live boundary while it is recorded: each call answered (scripted here, a
    real model and real tools in an agent) and emitted to the recorder as it happens."""

    def __init__(self, recorder: RunRecorder) -> None:
        self.recorder = recorder
        self.calls = 0

    def _next_id(self) -> str:
        self.calls += 1
        return f"c{self.calls}"

    def model_call(self, model_id: str, prompt: Any) -> Any:
        response = "check the docs"
        self.recorder.emit(
            ModelCallEnvelope(
                call_id=self._next_id(),
                model_id=model_id,
                model_version="2026-01",
                prompt_bundle_hash=PROMPT_BUNDLE,
                temperature=0,
                prompt=prompt,
                response=response,
            )
        )
        return response

    def tool_call(self, name: str, arguments: Any) -> Any:
        call_id = self._next_id()
        self.recorder.emit(
            ToolCall(call_id=call_id, tool=name, tool_schema_hash=SCHEMA, arguments=arguments)
        )
        result = LIVE[name](arguments)
        self.recorder.emit(ToolResult(call_id=call_id, status="ok", result=result))
        return result

    def retrieve(self, query: str) -> list[dict[str, Any]]:
        request_id = self._next_id()
        hits = [RetrievalHit(uri="kb://note/1", score=0.5)]
        self.recorder.emit(RetrievalRequest(request_id=request_id, query=query))
        self.recorder.emit(RetrievalResponse(request_id=request_id, hits=hits))
        return [hit.model_dump(mode="json") for hit in hits]


def recorded(ledger: Ledger, capture_mode: str = "full_io", tenant: str = "default") -> str:
    """The agent's run on ticket 42, recorded for ``tenant``; its job id."""
    started = RunStarted(seed=7, input="ticket 42", capture_mode=capture_mode)
    recorder = RunRecorder(ledger.run_uploads, started, tenant)
    answer = agent(RecordingBoundary(recorder), "42")
    return recorder.complete(answer).job_id
