"""The exact error codes of the specification, and the one exception type that carries them.

Codes are compared as strings by machines (alerts, tests, HTTP clients), so they are spelled once,
here, exactly as seed 000 section 8 gives them, plus the two that DESIGN.md section 5 adds and
``ACCESS_DENIED`` for a replay the actor's roles do not allow (seed 000 section 10).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


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
