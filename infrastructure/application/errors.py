"""One table for every error the product raises: its code, its HTTP status and its exit code.

The HTTP service and ``mace`` both answer through `failure_of`, so the same failure carries the
same code on both sides. The seeds' codes are spelled in `domain.errors` (and the receipt
refusals in `domain.receipt`); the codes of the service and the store are spelled here. Exit
codes (DESIGN.md section 6): 1 the operation ran and failed, 2 bad usage or input (nothing has
been written).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from eventsourcing.persistence import PersistenceError
from pydantic import ValidationError

from domain.canonical import canonical_json
from domain.errors import (
    ConflictError,
    ErrorCode,
    InvalidInput,
    MaceError,
    NotFoundError,
    StoreBusyError,
)
from domain.fork import ForkCode, NotForkable
from domain.receipt import Unreplayable, UnreplayableCode
from domain.run_draft import RunTooLarge
from infrastructure.storage.records.key_checks import KeyMismatch, MissingSigningKey

# How an entry point (``mace`` and the commands beside the service and the tools) ends:
# 0 success; 1 the operation ran and failed; 2 bad usage or input, nothing written.
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # what a shell reports for a command Ctrl-C stopped (128 + SIGINT)


class Code(StrEnum):
    """The codes of the service and the store, beside the seeds' `ErrorCode`."""

    NOT_FOUND = "NOT_FOUND"
    CONFLICT = "CONFLICT"
    INVALID_INPUT = "INVALID_INPUT"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
    STORE_BUSY = "STORE_BUSY"
    KEY_MISMATCH = "KEY_MISMATCH"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
    NOT_READY = "NOT_READY"
    WITNESS_FAILED = "WITNESS_FAILED"


class WitnessFailed(Exception):
    """A witness did not cosign (`infrastructure.application.witnesses`): it refused, answered
    out of spec, or did not answer; or too few of a policy's witnesses cosigned."""


@dataclass(frozen=True)
class Answer:
    status: int
    exit_code: int


ANSWERS: Final[Mapping[str, Answer]] = {
    ErrorCode.MISSING_SNAPSHOT: Answer(409, EXIT_FAILED),
    ErrorCode.INTEGRITY_FAILURE: Answer(500, EXIT_FAILED),
    ErrorCode.MISSING_PERSISTED_AGENT_OUTPUT: Answer(409, EXIT_FAILED),
    ErrorCode.RESULT_MISMATCH: Answer(409, EXIT_FAILED),
    ErrorCode.REPLAY_DIVERGENCE: Answer(409, EXIT_FAILED),
    ErrorCode.FORCE_CONTINUE_REQUIRED: Answer(409, EXIT_FAILED),
    ErrorCode.REPLAY_TIMEOUT: Answer(409, EXIT_FAILED),
    ErrorCode.FORCE_HALT_REPLAY: Answer(409, EXIT_FAILED),
    ErrorCode.UNSUPPORTED_RULES: Answer(409, EXIT_FAILED),
    ErrorCode.ACCESS_DENIED: Answer(403, EXIT_FAILED),
    UnreplayableCode.MISSING_POLICY_SNAPSHOT: Answer(422, EXIT_FAILED),
    UnreplayableCode.NESTED_REPLAY: Answer(422, EXIT_FAILED),
    UnreplayableCode.INVALID_SNAPSHOT: Answer(422, EXIT_FAILED),
    # The request cannot be served for this job (what it holds cannot be decided again):
    # nothing was written, as for bad input.
    ForkCode.NOT_REDECIDABLE: Answer(422, EXIT_USAGE),
    Code.NOT_FOUND: Answer(404, EXIT_USAGE),
    Code.CONFLICT: Answer(409, EXIT_USAGE),
    Code.INVALID_INPUT: Answer(422, EXIT_USAGE),
    Code.PAYLOAD_TOO_LARGE: Answer(413, EXIT_USAGE),
    # Only the service's configuration is at fault: nothing was written, no request was wrong.
    Code.KEY_MISMATCH: Answer(503, EXIT_USAGE),
    Code.STORE_UNAVAILABLE: Answer(503, EXIT_FAILED),
    Code.STORE_BUSY: Answer(503, EXIT_FAILED),
    Code.UNAUTHENTICATED: Answer(401, EXIT_USAGE),
    Code.METHOD_NOT_ALLOWED: Answer(405, EXIT_USAGE),
    Code.NOT_READY: Answer(503, EXIT_FAILED),
    # A witness refused to cosign, or did not answer: witnessing ran and failed.
    Code.WITNESS_FAILED: Answer(502, EXIT_FAILED),
}
"""Every code, by its exact string."""


@dataclass(frozen=True)
class Failure:
    """An error as both entry points answer it: code, one-line message, status, exit code."""

    code: str
    message: str
    status: int
    exit_code: int

    def line(self, as_json: bool) -> str:
        """How ``mace`` says it on stderr: ``mace: CODE: message``, or for a ``--json`` caller
        the JSON error the HTTP service answers with."""
        if as_json:
            return canonical_json({"error": {"code": self.code, "message": self.message}}).decode()
        return f"mace: {self.code}: {self.message}"


def failure(code: str, message: str) -> Failure:
    answer = ANSWERS[code]
    line = message.splitlines()[0] if message else code
    return Failure(str(code), line, answer.status, answer.exit_code)


def _mace_error(exc: Any) -> tuple[str, str]:
    return exc.code, exc.message


def _unreplayable(exc: Any) -> tuple[str, str]:
    return exc.code, str(exc)


def _store_unavailable(exc: Any) -> tuple[str, str]:
    return Code.STORE_UNAVAILABLE, f"store unavailable: {exc}"


def _invalid_model(exc: Any) -> tuple[str, str]:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return Code.INVALID_INPUT, (f"{where}: {first['msg']}" if where else first["msg"])


def _fixed(code: Code) -> Callable[[Any], tuple[str, str]]:
    return lambda exc: (code, str(exc))


ERRORS: Final[Mapping[type[Exception], Callable[[Any], tuple[str, str]]]] = {
    MaceError: _mace_error,
    Unreplayable: _unreplayable,
    NotForkable: _unreplayable,
    NotFoundError: _fixed(Code.NOT_FOUND),
    ConflictError: _fixed(Code.CONFLICT),
    # Bad input of every kind (an argument, a file, a body, a setting, a snapshot named for a job
    # that is absent or unusable): the request's fault, nothing written.
    InvalidInput: _fixed(Code.INVALID_INPUT),
    StoreBusyError: _fixed(Code.STORE_BUSY),
    # More than a run may hold (`limits.InputLimits`), whichever way it came in.
    RunTooLarge: _fixed(Code.PAYLOAD_TOO_LARGE),
    KeyMismatch: _fixed(Code.KEY_MISMATCH),
    WitnessFailed: _fixed(Code.WITNESS_FAILED),
    # A key retired and removed from the keyring: the configuration lacks it (not tampering).
    MissingSigningKey: _fixed(Code.KEY_MISMATCH),
    ValidationError: _invalid_model,
    PersistenceError: _store_unavailable,
    # A helper process the system took away (an audit worker): the operation did not finish.
    ChildProcessError: _fixed(Code.STORE_UNAVAILABLE),
    # What the store's files or sockets refuse (SQLite's file, a connection) is the store's.
    OSError: _store_unavailable,
}
"""Every exception type the product answers, with how its code and message are found."""


def failure_of(exc: BaseException) -> Failure | None:
    """How the product answers ``exc``; None for an exception it does not expect (a bug)."""
    for kind in type(exc).__mro__:
        if kind in ERRORS:
            return failure(*ERRORS[kind](exc))
    return None
