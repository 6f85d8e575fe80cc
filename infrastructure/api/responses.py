"""Every JSON body the service sends is canonical JSON (domain.canonical), as the CLI's is."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from domain.canonical import canonical_json


class CanonicalJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return canonical_json(content)
