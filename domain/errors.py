"""The exact error codes of the specification, and the one exception type that carries them.

Codes are compared as strings by machines (alerts, tests, HTTP clients), so they are spelled once,
here, exactly as seed 000 section 8 gives them, plus the two that DESIGN.md section 5 adds and
``ACCESS_DENIED`` for a replay the actor's roles do not allow (seed 000 section 10).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any
from uuid import UUID


class ErrorCode(StrEnum):
    MISSING_SNAPSHOT = "MISSING_SNAPSHOT"
    INTEGRITY_FAILURE = "INTEGRITY_FAILURE"
    MISSING_PERSISTED_AGENT_OUTPUT = "MISSING_PERSISTED_AGENT_OUTPUT"
    RESULT_MISMATCH = "RESULT_MISMATCH"
    REPLAY_DIVERGENCE = "REPLAY_DIVERGENCE"
    FORCE_CONTINUE_REQUIRED = "FORCE_CONTINUE_REQUIRED"
    REPLAY_TIMEOUT = "REPLAY_TIMEOUT"
    FORCE_HALT_REPLAY = "FORCE_HALT_REPLAY"
    UNSUPPORTED_RULES = "UNSUPPORTED_RULES"
    """The job was recorded under a serializer, numeric rules or id generators this ledger does
    not implement (`domain.provenance`): replaying it could only report false divergences."""
    ACCESS_DENIED = "ACCESS_DENIED"


class MaceError(Exception):
    """An operation that ran and failed for a reason a machine can switch on."""

    def __init__(self, code: ErrorCode, message: str, **details: Any) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
        self.details = details


class InvalidInput(ValueError):
    """What the caller sent cannot be used (a bad argument, file, body or reference): the one
    error for bad input, answered ``INVALID_INPUT`` (HTTP 422, exit 2); nothing is written."""


class OpenJob(InvalidInput):
    """The job is still being recorded (not sealed): nothing of it can be replayed yet."""


class SnapshotError(InvalidInput):
    """A snapshot named for a job is absent, of the wrong kind, or unusable for its kind."""


class NotFoundError(LookupError):
    """The named job, snapshot or other record is not in the ledger."""


class ConflictError(ValueError):
    """The record already exists, or changed underneath this command."""


class StoreBusyError(Exception):
    """Other writers kept winning the race for the same records: nothing was written; try again."""


class IntegrityFailure(MaceError):
    """Stored bytes that do not verify: the stream and version are named, nothing is decoded."""

    def __init__(self, stream: UUID | str, version: int, reason: str) -> None:
        super().__init__(
            ErrorCode.INTEGRITY_FAILURE,
            f"stream {stream} version {version}: {reason}",
            stream=str(stream),
            version=version,
            reason=reason,
        )
        self.stream = str(stream)
        self.version = version
        self.reason = reason

    def __reduce__(self) -> tuple[type[IntegrityFailure], tuple[str, int, str]]:
        # Made again from its parts, as it was raised: `side_pass` sends it between processes.
        return type(self), (self.stream, self.version, self.reason)


class RefusedWrite(IntegrityFailure):
    """A write the store refused though no other writer had written first: no race lost, so
    either the store does not hold what was read from it, or something below the ledger (a
    trigger, a read-only table) refuses writes. Nothing of the write was stored."""
