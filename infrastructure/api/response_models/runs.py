"""Answers about runs recorded from outside: a run's state, a batch taken in, a run completed."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from domain.events import MissingArtifact
from infrastructure.api.response_models import ResponseModel


class RunState(ResponseModel):
    run_id: str
    status: Literal["open", "completed", "abandoned"]
    events: int = Field(description="how many events the run holds")


class OpenRun(ResponseModel):
    run_id: str
    events: int = Field(description="how many events the run holds")
    position: int = Field(description="where the log holds its start: older runs first")


class OpenRuns(ResponseModel):
    """The caller's tenant's runs neither completed nor abandoned (an emitter that died
    leaves one), oldest first."""

    runs: list[OpenRun]


class BatchTaken(ResponseModel):
    run_id: str
    accepted: int = Field(description="events of the batch new to the run, now held")
    duplicates: int = Field(description="events of the batch the run already held, skipped")
    events: int = Field(description="how many events the run holds now")


class RecordedRun(ResponseModel):
    """The run recorded as one sealed job: its id, how many events, and whether it can be
    replayed in production (what is missing otherwise)."""

    job_id: str
    events: int
    replayable: bool
    missing_artifacts: list[MissingArtifact]
