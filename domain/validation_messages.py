"""One-line messages for pydantic validation errors: which field, and what is wrong with it."""

from __future__ import annotations

from pydantic import ValidationError


def first_problem(exc: ValidationError, skip: int = 0) -> str:
    """``field a.b[2]: message`` for the first error; ``skip`` drops leading location parts
    (a discriminated union puts the event type tag first)."""
    error = exc.errors()[0]
    path = ""
    for part in list(error["loc"])[skip:]:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"field {path.lstrip('.')}: {message}" if path else message
