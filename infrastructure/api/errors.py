"""How the HTTP service says no: a status, an exact code and one line, in one body shape.

Every error answers ``{"error": {"code", "message"}}`` (422 adds ``field``, the path of the first
invalid value). Replay and integrity codes are the seeds' own (`domain.errors.ErrorCode`); the
transport adds its codes here. A job or run of another tenant is answered exactly as one that
does not exist.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from domain.canonical import canonical_json
from domain.errors import ErrorCode, MaceError


class HttpCode(StrEnum):
    UNAUTHENTICATED = "UNAUTHENTICATED"
    NOT_FOUND = "NOT_FOUND"
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
    CONFLICT = "CONFLICT"
    INVALID_INPUT = "INVALID_INPUT"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
    NOT_READY = "NOT_READY"


class ApiError(Exception):
    """An answer other than success: HTTP status, code and a one-line message."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message.splitlines()[0] if message else code
        self.field = field

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            error["field"] = self.field
        return {"error": error}

    def content(self) -> bytes:
        return canonical_json(self.body())


def from_mace_error(exc: MaceError) -> ApiError:
    """A replay or integrity failure raised outside a replay report."""
    status = {ErrorCode.ACCESS_DENIED: 403, ErrorCode.INTEGRITY_FAILURE: 500}.get(exc.code, 409)
    return ApiError(status, exc.code.value, exc.message)


def not_found(what: str) -> ApiError:
    return ApiError(404, HttpCode.NOT_FOUND, f"no {what}")


def invalid(message: str, field: str | None = None) -> ApiError:
    return ApiError(422, HttpCode.INVALID_INPUT, message, field)


def too_large(message: str) -> ApiError:
    return ApiError(413, HttpCode.PAYLOAD_TOO_LARGE, message)
