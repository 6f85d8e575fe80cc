"""Replay answers: the replay report (seed 000 section 6), a replay attempt's record, and what
``POST /replay/request`` answers."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from domain.errors import ErrorCode
from domain.events import MissingArtifact
from domain.job import CaptureMode
from domain.replay_access import ReplayMode
from domain.snapshot import SnapshotKind
from infrastructure.api.response_models import ResponseModel
from infrastructure.api.response_models.governance import ActorShown
from projections.replay_checks import Check


class StepLogged(ResponseModel):
    """One verification step, in the order the replay took it."""

    step: str
    outcome: Literal["ok", "failed", "skipped", "changed"]
    detail: str


class DivergenceShown(ResponseModel):
    """Where the replay differs from the record: the field and both values, canonical."""

    code: ErrorCode
    iteration: int | None = Field(description="null: a fact of the whole job")
    field: str
    recorded: JsonValue
    replayed: JsonValue


class FactChecked(ResponseModel):
    """How the replay checked one recorded fact (or one fact derived from them)."""

    sequence_index: int | None = Field(description="null: a derived fact, not an event")
    subject: str
    check: Check
    detail: str
    uri: str | None = Field(
        default=None,
        description="the fact's evidence address (null for a derived fact); absent from"
        " reports recorded before facts had addresses",
    )


class CheckCounts(ResponseModel):
    """How many facts each kind of check covered, every kind named."""

    reexecuted: int
    hash_compared: int
    taken_as_recorded: int
    missing: int
    diverged: int
    not_checked: int


class _ReportFacts(ResponseModel):
    """What every version of the report says."""

    job_id: str
    attempt: int = Field(description="0: a replay that was not recorded (from a bundle)")
    mode: ReplayMode
    actor: ActorShown
    force_continue: bool
    ok: bool = Field(
        description="version 3: the replay reproduced the job; before: no error stopped it"
    )
    error_message: str | None
    authoritative: bool
    non_authoritative_reasons: list[str]
    capture_mode: CaptureMode | None = Field(description="null: the job could not be read")
    snapshot_ids: dict[SnapshotKind, str | None]
    steps: list[StepLogged]
    divergences: list[DivergenceShown]
    unreconstructable: list[MissingArtifact]


class ReplayReport(_ReportFacts):
    """The replay report, versions 2 and 3: the verdict's facts and how each recorded fact was
    checked (3: ``ok`` means reproduced, as ``reproduced`` does)."""

    report_version: Literal[2, 3]
    uri: str | None = Field(
        default=None,
        description="the report's address (null: not recorded); absent from reports recorded"
        " before reports had addresses",
    )
    tenant: str | None = Field(
        default=None, description="absent from reports recorded before reports had addresses"
    )
    reproduced: bool = Field(
        description="no error, and at least one recorded fact re-executed and matched"
    )
    error_code: ErrorCode | None
    checks: list[FactChecked]
    check_counts: CheckCounts


class ReplayReportV1(_ReportFacts):
    """A replay report recorded before version 2: no table of checks."""

    report_version: Literal[1]
    error_code: str | None


AnyReplayReport = ReplayReport | ReplayReportV1


class ReplayAttempt(ResponseModel):
    """One replay attempt's record: its verification steps and its report, as stored."""

    replay_id: str = Field(description="<job_id>#<attempt>")
    job_id: str
    attempt: int
    mode: ReplayMode
    steps: list[StepLogged]
    report: AnyReplayReport | None = Field(description="null: a record begun before reports")
    report_markdown: str | None


class ReplayFailure(ResponseModel):
    """Why the replay did not reproduce the job: the report's error code and message."""

    code: ErrorCode
    message: str | None


class ReplayAnswer(ResponseModel):
    """A replay, recorded: its verdict, the report and the report rendered as Markdown. A replay
    refused for the caller's roles answers 403 with this same body (the attempt is recorded)."""

    job_id: str
    attempt: int
    ok: bool = Field(description="the replay reproduced the job")
    authoritative: bool
    error: ReplayFailure | None = Field(
        description="null when no error stopped the replay (not ok with no error: NOT REPRODUCED)"
    )
    report: ReplayReport
    report_markdown: str
