"""Memory answers: a memory remembered, the live ones, one forgotten."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from domain.policy import MemoryKind
from infrastructure.api.response_models import ResponseModel


class Provenance(ResponseModel):
    actor: str = Field(description="who wrote it: the token's actor")
    recorded_at: str = Field(description="when, by the ops clock: never a ranking input")
    origin: JsonValue = Field(description="where it came from, as the writer said")


class MemoryShown(ResponseModel):
    memory_id: str
    kind: MemoryKind
    key: str | None = Field(description="a fact's SEM key; null for an episode")
    content: JsonValue = Field(description="a fact's value or an episode's text")
    labels: list[str]
    provenance: Provenance
    position: int = Field(description="the memory log position it was written at")


class LiveMemories(ResponseModel):
    log_position: int = Field(description="the tenant's memory log position (0: none written)")
    memories: list[MemoryShown]


class MemoryForgotten(ResponseModel):
    memory_id: str
    forgotten: Literal[True]
