"""A run recorded elsewhere, as JSON lines: ``RunStarted``, events, ``RunCompleted``.

The whole file is validated before anything is recorded, so a malformed line (reported with its
number and field) leaves the ledger untouched.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import ValidationError

from domain.errors import InvalidInput
from domain.events import EMITTED_TYPES, INGEST_LINE, RunCompleted, RunEvent, RunStarted
from domain.json_input import JSONInputError, parse_json_input
from domain.tool_boundary import ToolBoundaryError, check_tool_boundary, tool_steps
from domain.validation_messages import first_problem

LINE_TYPES = (
    RunStarted.EVENT_TYPE,
    RunCompleted.EVENT_TYPE,
    *(t.EVENT_TYPE for t in EMITTED_TYPES),
)


class RunFileError(InvalidInput):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


@dataclass(frozen=True, slots=True)
class ParsedRun:
    started: RunStarted
    events: list[RunEvent]
    completed: RunCompleted


def parse_line(number: int, line: bytes) -> RunEvent:
    try:
        data = parse_json_input(line)
    except JSONInputError as exc:
        raise RunFileError(number, str(exc)) from None
    if not isinstance(data, dict):
        raise RunFileError(number, f"expected a JSON object, got {type(data).__name__}")
    if data.get("type") not in LINE_TYPES:
        given = "missing" if "type" not in data else repr(data["type"])
        raise RunFileError(number, f"field type: {given}, expected one of {', '.join(LINE_TYPES)}")
    try:
        event: RunEvent = INGEST_LINE.validate_python(data)
    except ValidationError as exc:
        raise RunFileError(number, first_problem(exc, skip=1)) from None
    return event


def parse_run(lines: Iterable[bytes]) -> ParsedRun:
    """Validate a whole run file; RunFileError names the first bad line and field."""
    parsed = [
        (number, parse_line(number, line))
        for number, line in enumerate(lines, start=1)
        if line.strip()
    ]
    if not parsed:
        raise RunFileError(1, "no events: a run is RunStarted, its events, then RunCompleted")
    first_line, started = parsed[0]
    if not isinstance(started, RunStarted):
        raise RunFileError(first_line, f"a run starts with RunStarted, not {started.EVENT_TYPE}")
    last_line, completed = parsed[-1]
    if not isinstance(completed, RunCompleted) or len(parsed) < 2:
        raise RunFileError(last_line, "a run ends with RunCompleted")
    for number, event in parsed[1:-1]:
        if isinstance(event, RunStarted | RunCompleted):
            raise RunFileError(number, f"{event.EVENT_TYPE} may only open or close the run")
    events = [event for _, event in parsed[1:-1]]
    try:
        check_tool_boundary(tool_steps(events))
    except ToolBoundaryError as bad:
        raise RunFileError(parsed[1 + bad.position][0], str(bad)) from None
    return ParsedRun(started, events, completed)
