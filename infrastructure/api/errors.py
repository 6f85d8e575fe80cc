"""How the HTTP service says no: a status, an exact code and one line, in one body shape.

Every error answers ``{"error": {"code", "message"}}`` (422 adds ``field``, the path of the first
invalid value). Codes and statuses come from the one error table
(`infrastructure.application.errors`), the same the command line answers by. A job or run of
another tenant is answered exactly as one that does not exist.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import Field

from domain.canonical import canonical_json
from domain.errors import ErrorCode, MaceError
from infrastructure.api.response_models import ResponseModel
from infrastructure.api.response_models.replays import DivergenceShown
from infrastructure.application.errors import ANSWERS, Code, Failure, failure


class ApiError(Exception):
    """An answer other than success: HTTP status, code and a one-line message."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        divergence: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message.splitlines()[0] if message else code
        self.field = field
        self.divergence = divergence

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            error["field"] = self.field
        if self.divergence is not None:
            error["divergence"] = self.divergence
        return {"error": error}

    def content(self) -> bytes:
        return canonical_json(self.body())

    @classmethod
    def of(cls, failure: Failure, field: str | None = None) -> ApiError:
        return cls(failure.status, failure.code, failure.message, field)

    @classmethod
    def of_exception(cls, failure: Failure, exc: BaseException) -> ApiError:
        """The answer to ``exc``: a re-execution's divergence (`ReplayDiverged`) carries its
        canonical diff beside the code, so a client need not parse the message for it."""
        divergence = exc.details.get("divergence") if isinstance(exc, MaceError) else None
        return cls(failure.status, failure.code, failure.message, divergence=divergence)


def refusal(code: str, message: str, field: str | None = None) -> ApiError:
    """The answer for ``code``, with the status the error table gives it."""
    return ApiError.of(failure(code, message), field)


def not_found(what: str) -> ApiError:
    return refusal(Code.NOT_FOUND, f"no {what}")


def invalid(message: str, field: str | None = None) -> ApiError:
    return refusal(Code.INVALID_INPUT, message, field)


def too_large(message: str) -> ApiError:
    return refusal(Code.PAYLOAD_TOO_LARGE, message)


class ErrorDetail(ResponseModel):
    code: str = Field(description="the exact code a machine switches on (the error table's)")
    message: str = Field(description="one line: what was wrong and what is expected")
    field: str | None = Field(default=None, description="422 only: the path of the first bad value")
    divergence: DivergenceShown | None = Field(
        default=None,
        description="a re-execution's call that left its recording (REPLAY_DIVERGENCE) only:"
        " where, and both values, canonical",
    )


class ErrorBody(ResponseModel):
    """The one shape every error answer has (documented in the OpenAPI document)."""

    error: ErrorDetail


# What the OpenAPI document says of each error status; the status itself comes from the table.
_DESCRIBED: tuple[tuple[str, str], ...] = (
    (Code.UNAUTHENTICATED, "no bearer token, or one that is not valid"),
    (ErrorCode.ACCESS_DENIED, "the caller's roles do not allow this"),
    (Code.NOT_FOUND, "no such job, run, snapshot or replay for this tenant"),
    (Code.CONFLICT, "conflicts with what is stored"),
    (Code.PAYLOAD_TOO_LARGE, "body, batch or run larger than allowed"),
    (Code.INVALID_INPUT, "invalid input; field names the first bad value"),
    (ErrorCode.INTEGRITY_FAILURE, "stored data failed verification"),
    (Code.STORE_UNAVAILABLE, "the store cannot be reached"),
    (Code.STORE_BUSY, "the store is busy: retry"),
    (Code.KEY_MISMATCH, "the store was signed with another secret under a configured key id"),
)


def _error_answers() -> dict[int | str, dict[str, Any]]:
    texts: dict[int, list[str]] = {}
    for code, text in _DESCRIBED:
        texts.setdefault(ANSWERS[code].status, []).append(f"{text} ({code})")
    return {
        status: {"model": ErrorBody, "description": "; ".join(described)}
        for status, described in sorted(texts.items())
    }


ERROR_ANSWERS: Final = _error_answers()


def documented(*answers: tuple[int, str]) -> dict[int | str, dict[str, Any]]:
    """An endpoint's own error answers, each described for it, in the one error body shape."""
    return {status: {"model": ErrorBody, "description": text} for status, text in answers}
