"""What ``POST /v1/audits`` answers: the audit's verdicts, totals and what it did not check."""

from __future__ import annotations

from pydantic import Field

from infrastructure.api.response_models import ResponseModel
from infrastructure.api.response_models.replays import CheckCounts, DivergenceShown
from projections.audit import Verdict


class JobAudited(ResponseModel):
    job: str = Field(description="the job's stream name")
    stream: str
    verdict: Verdict
    code: str | None = Field(description="the error code, if the verdict has one")
    detail: str
    divergence: DivergenceShown | None = Field(description="a diverged job's first divergence")
    check_counts: CheckCounts | None = Field(
        description="how many of its facts each kind of check covered; null: not replayed"
    )


class StreamFailed(ResponseModel):
    """A stream outside the audited jobs that failed verification, and where."""

    stream: str
    version: int
    reason: str


class AuditTotals(ResponseModel):
    events: int
    streams: int
    jobs: int
    ok: int
    diverged: int
    integrity_failures: int
    not_replayable: int
    open: int
    stream_failures: int = Field(description="named and unnamed (another tenant's) alike")
    not_yet_checkpointed: int
    facts_reexecuted: int = Field(description="the replayed jobs' facts, by how each was checked")
    facts_hash_compared: int
    facts_taken_as_recorded: int
    facts_missing: int
    facts_diverged: int
    facts_not_checked: int


class AuditAnswer(ResponseModel):
    """The audit, as its signed record keeps it, with the per-job results."""

    ok: bool = Field(description="no divergence and no integrity failure")
    audit_id: str
    workers: int
    tenant: str | None
    since: int
    through: int
    first_notification_id: int | None
    last_notification_id: int | None
    totals: AuditTotals
    not_replayable: dict[str, int] = Field(
        description="jobs not replayable, by why: an error code, or 'taken as recorded'"
    )
    results_digest: str
    checked: list[str]
    not_checked: list[str]
    jobs: list[JobAudited]
    stream_failures: list[StreamFailed]
