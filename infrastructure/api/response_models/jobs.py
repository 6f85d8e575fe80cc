"""Job answers: a Stage-0 job just run, the job listing, a job's reflective log and its events.

A job's log and events are shown to non-admins with personal data replaced by
``[REDACTED:pii]`` (`infrastructure.application.personal_data`): only strings and SEM values are
replaced, so every field keeps its type, and none here carries a pattern a redaction could break.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from domain.capture import CaptureWhy
from domain.events import MissingArtifact
from domain.job import CaptureMode
from infrastructure.api.response_models import ResponseModel

JobStatus = Literal["open", "completed", "sealed", "abandoned"]
RecordedFields = dict[str, JsonValue]
"""A recorded fact's fields, as the run recorded them (their names depend on what it is)."""


class SnapshotIds(ResponseModel):
    """The job's declared snapshot of each kind (null: none declared)."""

    selfrep_snapshot_id: str | None
    brainstate_snapshot_id: str | None
    router_snapshot_id: str | None
    privacy_snapshot_id: str | None
    governance_snapshot_id: str | None


class TraceEntry(ResponseModel):
    """One iteration's trace (`domain.events.IterationTrace` without its framing): the fields a
    replay must reproduce exactly."""

    router_decision: RecordedFields
    selected_agents: list[str]
    agent_outputs: list[RecordedFields]
    sem_reads: list[RecordedFields]
    sem_writes: list[RecordedFields]
    final_output: JsonValue
    council_votes: list[RecordedFields]
    claims: list[RecordedFields]
    evidence_items: list[RecordedFields]
    brainstate_before: RecordedFields
    brainstate_after: RecordedFields


class RunReport(ResponseModel):
    """A Stage-0 job just run: its answer and its one iteration's decisions."""

    job_id: str
    job_seed: str
    input: str
    capture_mode: CaptureMode
    capture_why: CaptureWhy = Field(
        description="asked: the caller chose the mode; default: prompts_only (seed 003);"
        " changes_sem: full_io, the default for a job that changes SEM (seed 000 section 12)"
    )
    final_output: JsonValue
    replayable: bool
    missing_artifacts: list[MissingArtifact]
    router_decision: RecordedFields
    selected_agents: list[str]
    sem_reads: list[RecordedFields]
    sem_writes: list[RecordedFields]
    snapshot_ids: SnapshotIds


class JobSummary(ResponseModel):
    job_id: str
    tenant: str
    status: JobStatus
    capture_mode: CaptureMode
    replayable: bool | None = Field(description="null while the job is open")
    missing_artifacts: list[MissingArtifact]


class JobListing(ResponseModel):
    jobs: list[JobSummary]
    total: int = Field(description="how many jobs the filter kept, before limit and offset")


class PersonalDataShown(ResponseModel):
    versions: list[int] = Field(description="the versions of the events that carry personal data")
    redacted: bool = Field(description="true: personal data was replaced by [REDACTED:pii]")


class JobLog(SnapshotIds):
    """A job's reflective log (seed 000 section 9), its status, how its personal data is shown."""

    job_id: str
    job_seed: str
    input: str
    capture_mode: CaptureMode
    iteration_trace: list[TraceEntry]
    final_answer: JsonValue = Field(description="null while the job is open")
    replayable: bool | None = Field(description="null while the job is open")
    missing_artifacts: list[MissingArtifact]
    sealed: bool
    status: JobStatus
    personal_data: PersonalDataShown


class JobEvent(ResponseModel):
    """One event of a job's stream: a recorded fact (with its sequence index, id and address), or
    the framing the ledger adds (JobStarted, JobSealed: those three null)."""

    version: int
    timestamp: str = Field(description="from the job's deterministic clock, ISO-8601 UTC")
    sequence_index: int | None
    event_id: str | None
    event_type: str
    payload: RecordedFields
    uri: str | None = Field(description="the fact's evidence address, mace://...")


class JobEvents(ResponseModel):
    job_id: str
    events: list[JobEvent]
    personal_data: PersonalDataShown
