"""The tool and retrieval boundary of a run (seed 002: the governed execution boundary, tools
and memory): each tool call and each retrieval request made once, each result or response
answering a call or request made before it in the same run, once.

A replay re-applies every tool from its recorded result, never by calling it, and compares each
retrieval served from the ledger with the one response that answers it; a result or response that
answers nothing, or a second answer to one call or request, has no place in that replay and is
refused where the run is taken in (the line of a run file, the event of a batch). A call that no
result answers is stored, but the job cannot be replayed in production: its result is a missing
artifact (`unanswered_calls`, `domain.capture`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from domain.errors import InvalidInput

TOOL_CALL = "ToolCall"
TOOL_RESULT = "ToolResult"
RETRIEVAL_REQUEST = "RetrievalRequest"
RETRIEVAL_RESPONSE = "RetrievalResponse"

_ANSWERING: Final = {
    TOOL_RESULT: (TOOL_CALL, "call_id"),
    RETRIEVAL_RESPONSE: (RETRIEVAL_REQUEST, "request_id"),
}
"""Each kind of answer: the kind of event it answers, and the field naming which one."""
_ASKING: Final = {question: name for question, name in _ANSWERING.values()}
_KEY: Final = {**_ASKING, **{answer: name for answer, (_, name) in _ANSWERING.items()}}


class ToolBoundaryError(InvalidInput):
    """A run's tool call or result out of place; ``position`` is the event's, in what was
    checked (a run's events, a batch)."""

    def __init__(self, position: int, message: str) -> None:
        super().__init__(message)
        self.position = position


def check_tool_boundary(events: Iterable[tuple[str, object]]) -> None:
    """`ToolBoundaryError` at the first event `tool_boundary_problem` finds."""
    problem = tool_boundary_problem(events)
    if problem is not None:
        raise ToolBoundaryError(*problem)


def tool_boundary_problem(events: Iterable[tuple[str, object]]) -> tuple[int, str] | None:
    """The first of ``(event type, call_id or request_id)`` in run order that breaks the
    boundary, as its position and what is wrong; None when every call, request and answer is in
    its place."""
    asked: set[tuple[str, object]] = set()
    answered: set[tuple[str, object]] = set()
    for position, (event_type, key) in enumerate(events):
        if event_type in _ASKING:
            if (event_type, key) in asked:
                return position, f"{event_type} {key!r} is made a second time in this run"
            asked.add((event_type, key))
        elif event_type in _ANSWERING:
            question, name = _ANSWERING[event_type]
            if (question, key) not in asked:
                return position, (
                    f"{event_type} answers {name} {key!r}, which no earlier {question} made"
                )
            if (event_type, key) in answered:
                return position, f"{event_type} answers {name} {key!r} a second time"
            answered.add((event_type, key))
    return None


def unanswered_calls(events: Sequence[tuple[str, object]]) -> list[int]:
    """The positions of the tool calls no result answers, in run order."""
    answered = {call_id for event_type, call_id in events if event_type == TOOL_RESULT}
    return [
        position
        for position, (event_type, call_id) in enumerate(events)
        if event_type == TOOL_CALL and call_id not in answered
    ]


def tool_steps(events: Iterable[object]) -> list[tuple[str, object]]:
    """``(event type, call_id or request_id)`` of run events (models, or their JSON as a draft
    keeps it)."""
    return [_step(event) for event in events]


def _step(event: object) -> tuple[str, object]:
    if isinstance(event, dict):
        event_type = str(event.get("type"))
        return event_type, event.get(_KEY.get(event_type, "call_id"))
    event_type = str(getattr(event, "EVENT_TYPE", ""))
    return event_type, getattr(event, _KEY.get(event_type, "call_id"), None)
