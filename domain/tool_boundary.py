"""The tool, retrieval and model-call boundary of a run (seed 002: the governed execution
boundary, tools and memory): each tool call, retrieval request and model call made once, each
result or response answering a call or request made before it in the same run, once, with a
status its content does not contradict.

A replay re-applies every tool from its recorded result, never by calling it, and compares each
retrieval served from the ledger with the one response that answers it; a result or response that
answers nothing, or a second answer to one call or request, has no place in that replay and is
refused where the run is taken in (the line of a run file, the event of a batch), as is a second
model call under one id (which of the two would a trace's reference mean?). A call or request no
answer follows is stored, but the job cannot be replayed in production: its answer is a missing
artifact (`unanswered`, `domain.capture`), a tool call's and a retrieval's alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from domain.errors import InvalidInput

TOOL_CALL = "ToolCall"
TOOL_RESULT = "ToolResult"
RETRIEVAL_REQUEST = "RetrievalRequest"
RETRIEVAL_RESPONSE = "RetrievalResponse"
MODEL_CALL = "ModelCallEnvelope"

Step = tuple[str, object]
"""A run event's type and the call or request id it makes or answers (None for other events)."""

_ANSWERING: Final = {
    TOOL_RESULT: (TOOL_CALL, "call_id"),
    RETRIEVAL_RESPONSE: (RETRIEVAL_REQUEST, "request_id"),
}
"""Each kind of answer: the kind of event it answers, and the field naming which one."""
_ASKING: Final = {question: name for question, name in _ANSWERING.values()}
_MADE_ONCE: Final = {**_ASKING, MODEL_CALL: "call_id"}
"""Each kind of event a run makes once under its id: the calls and requests an answer names, and
model calls (an answer arrives inside the call's own envelope)."""
_KEY: Final = {**_MADE_ONCE, **{answer: name for answer, (_, name) in _ANSWERING.items()}}


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
        if event_type in _MADE_ONCE:
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


def unanswered(events: Sequence[tuple[str, object]]) -> list[int]:
    """The positions of the tool calls and retrieval requests no answer follows, in run order:
    one rule for both, no answer is a missing answer."""
    answered = {(_ANSWERING[t][0], key) for t, key in events if t in _ANSWERING}
    return [
        position
        for position, step in enumerate(events)
        if step[0] in _ASKING and step not in answered
    ]


_STATUSES: Final = ("ok", "error")


def contradicted_status(status: str, result: object) -> str | None:
    """The status a tool result's content says when it is not its ``status`` (None: it says the
    same, or nothing). A result says ``ok`` or ``error`` by a ``status`` member of that value or
    an ``ok`` member true or false, and ``error`` by a non-empty ``error`` member: an emitter
    whose result says one status and records the other claims both."""
    if not isinstance(result, dict):
        return None
    said: set[str] = set()
    if result.get("status") in _STATUSES:
        said.add(result["status"])
    if isinstance(result.get("ok"), bool):
        said.add("ok" if result["ok"] else "error")
    if result.get("error") not in (None, False, "", [], {}):
        said.add("error")
    other = sorted(said - {status})
    return other[0] if other else None


def tool_steps(events: Iterable[object]) -> list[Step]:
    """``(event type, call_id or request_id)`` of run events (models, or their JSON as a draft
    keeps it)."""
    return [_step(event) for event in events]


def _step(event: object) -> Step:
    if isinstance(event, dict):
        event_type = str(event.get("type"))
        return event_type, event.get(_KEY.get(event_type, "call_id"))
    event_type = str(getattr(event, "EVENT_TYPE", ""))
    return event_type, getattr(event, _KEY.get(event_type, "call_id"), None)
