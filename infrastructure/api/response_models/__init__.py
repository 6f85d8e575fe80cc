"""The bodies the service answers with, as pydantic models: what the OpenAPI document says of them.

They describe; they do not render. A route returns its body as it always has and the service
writes it through the one canonical serializer (`infrastructure.api.responses`). Each model is
declared in a route's ``responses`` (mostly through `infrastructure.api.responses.answers`), never
as its ``response_model``, so FastAPI neither validates nor serialises an answer through it: no
byte of a body depends on these models, and no body is validated twice. That the bodies are what
the models say is held by the tests: the test client checks every answer it receives against the
document (`tests/support/api_support.py`), and schemathesis' conformance checks fuzz every
operation, in process and against a live ``mace serve`` (`tests/api/test_api_fuzz.py`).

Every model forbids fields it does not name (``additionalProperties: false``), so a body that
grows a field the document does not describe fails those tests.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ResponseModel(BaseModel):
    """A body, or a part of one, exactly as the service answers it: no field beyond these."""

    model_config = ConfigDict(extra="forbid")
