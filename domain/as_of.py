"""Points in the ledger's log that an as-of replay serves memory from (issue 31 point 2; seed 003
``--as-of <CHECKPOINT>``, ``--compare-to <CHECKPOINT>``). Pure: parsing and naming only.

A point is a checkpoint number (``N`` or ``checkpoint:N``: the log as that signed checkpoint
covers it, up to its ``last_notification_id``) or a log position (``position:N``: a notification
id). The use case resolves it against the store (`MemoryAsOf`): the log position it stands for,
and the version the tenant's memory log had reached there, which is what a retrieval is served
from; SEM reads are served from each key's versions placed at or before that log position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from domain.errors import InvalidInput

_POINT: Final = re.compile(r"^(?:(checkpoint|position):)?([1-9][0-9]{0,17})$")
EXPECTED: Final = (
    "expected N or checkpoint:N (a checkpoint number) or position:N (a log position), N from 1"
)


@dataclass(frozen=True, slots=True)
class LogPoint:
    """A point as the caller named it: a checkpoint number, or a log position."""

    checkpoint: int | None
    position: int | None

    def label(self) -> str:
        if self.checkpoint is not None:
            return f"checkpoint {self.checkpoint}"
        return f"log position {self.position}"

    def as_json(self) -> dict[str, int]:
        """``{"checkpoint": N}`` or ``{"position": N}``: what the caller named, as recorded."""
        if self.checkpoint is not None:
            return {"checkpoint": self.checkpoint}
        assert self.position is not None
        return {"position": self.position}


def parse_point(text: str, option: str) -> LogPoint:
    """``text`` as ``option`` (``--as-of``, ``--compare-to``, or a body field) gives it; one
    line of InvalidInput, naming the option, for anything else."""
    matched = _POINT.fullmatch(text.strip())
    if matched is None:
        raise InvalidInput(f"{option} {text!r}: {EXPECTED}")
    kind, number = matched.group(1), int(matched.group(2))
    return LogPoint(None, number) if kind == "position" else LogPoint(number, None)


@dataclass(frozen=True, slots=True)
class MemoryAsOf:
    """A point resolved against the store: where an as-of replay serves memory from."""

    point: LogPoint
    log_position: int
    """The notification id the point stands for: SEM versions placed at or before it count."""
    memory_version: int
    """The tenant's memory log version at ``log_position`` (0: it held nothing yet)."""

    def as_json(self) -> dict[str, int]:
        return {
            **self.point.as_json(),
            "log_position": self.log_position,
            "memory_version": self.memory_version,
        }
