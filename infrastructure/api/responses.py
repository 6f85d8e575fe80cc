"""Every JSON body the service sends is canonical JSON (domain.canonical), as the CLI's is.

A route declares what it answers with `answers`: the pydantic model of its body (from
`infrastructure.api.response_models`) for the OpenAPI document, beside ``response_model=None``.
FastAPI then documents the model but renders the route's own return value through
`CanonicalJSONResponse`, so the model never filters, fills in, coerces or re-validates a body:
the bytes are the canonical JSON of what the route returned, as before it declared one.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel

from domain.canonical import canonical_json
from infrastructure.api.errors import documented


class CanonicalJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return canonical_json(content)


def answers(
    model: type[BaseModel], *errors: tuple[int, str], status: int = 200
) -> dict[int | str, dict[str, Any]]:
    """A route's documented answers: ``model`` for its success ``status``, and its own error
    answers (status, what it means here) in the one error body shape."""
    return {status: {"model": model}, **documented(*errors)}
