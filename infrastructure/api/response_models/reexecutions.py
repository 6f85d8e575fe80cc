"""Answers of a re-execution over HTTP: opened, and each call's answer (closing answers a
`ReplayAnswer`, as a replay does)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from infrastructure.api.response_models import ResponseModel


class ReexecutionOpened(ResponseModel):
    reexecution_id: str = Field(description="where the code's calls and its close go")
    job_id: str
    mode: Literal["reexecute", "production"]
    idle_seconds: float = Field(
        description="a re-execution with no call for longer is closed as abandoned (recorded)"
    )


class HarnessAnswer(ResponseModel):
    answer: JsonValue = Field(
        description="the recorded answer (a model's response, a tool's result, a retrieval's"
        " hits), the archived policy bundle's YAML, the recorded identity, the RNG's draw or"
        " the clock's instant (ISO-8601 UTC)"
    )
