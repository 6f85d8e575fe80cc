"""The tool boundary of a run (seed 002): each tool call made once, each result answering a call
made before it in the same run, once.

A replay re-applies every tool from its recorded result, never by calling it; a result that
answers no call, or a second result for one call, has no place in that replay and is refused
where the run is taken in (the line of a run file, the event of a batch). A call that no result
answers is stored, but the job cannot be replayed in production: its result is a missing
artifact (`unanswered_calls`, `domain.capture`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

TOOL_CALL = "ToolCall"
TOOL_RESULT = "ToolResult"


class ToolBoundaryError(ValueError):
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
    """The first of ``(event type, call_id)`` in run order that breaks the boundary, as its
    position and what is wrong; None when every call and result is in its place."""
    called: set[object] = set()
    answered: set[object] = set()
    for position, (event_type, call_id) in enumerate(events):
        if event_type == TOOL_CALL:
            if call_id in called:
                return position, f"ToolCall {call_id!r} is made a second time in this run"
            called.add(call_id)
        elif event_type == TOOL_RESULT:
            if call_id not in called:
                problem = f"ToolResult answers call_id {call_id!r}, which no earlier ToolCall made"
                return position, problem
            if call_id in answered:
                return position, f"ToolResult answers call_id {call_id!r} a second time"
            answered.add(call_id)
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
    """``(event type, call_id)`` of run events (models, or their JSON as a draft keeps it)."""
    return [_step(event) for event in events]


def _step(event: object) -> tuple[str, object]:
    if isinstance(event, dict):
        return str(event.get("type")), event.get("call_id")
    return str(getattr(event, "EVENT_TYPE", "")), getattr(event, "call_id", None)
