"""What ``POST /v1/whatif`` answers (and ``mace replay JOB --with ... --json`` prints): the
what-if's verdict, each changed decision in the replay's diff envelope, what it could not decide
again, and the replay it ran under the changes; what ``POST /v1/whatif/batch`` answers (``mace
audit --with ... --json``'s lines in one body); and a recorded what-if read back."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from domain.errors import ErrorCode
from domain.snapshot import SnapshotKind
from infrastructure.api.response_models import ResponseModel
from infrastructure.api.response_models.governance import ActorShown
from infrastructure.api.response_models.replays import DivergenceShown, ReplayReport
from projections.replay_checks import Check
from projections.whatif import WhatIfVerdict
from projections.whatif_batch import BatchVerdict


class WhatIfTotals(ResponseModel):
    differences: int
    iterations_changed: int
    job_level_changes: int = Field(description="differences of the whole job (iteration null)")
    facts_redecided: int
    facts_not_redecided: int


class NotRedecided(ResponseModel):
    """A recorded fact the what-if could not decide again: the run's word."""

    subject: str
    check: Check
    detail: str


class WhatIfError(ResponseModel):
    """Why the what-if could say nothing: the record not intact or not reproducing itself, or a
    change it could not use."""

    code: ErrorCode
    message: str


class WhatIfAnswer(ResponseModel):
    """A what-if, recorded (``record_id``): never authoritative."""

    record_id: str = Field(description="the signed counterfactual record that keeps it")
    report_version: Literal[1]
    kind: Literal["whatif"]
    kind_version: Literal[1]
    tenant: str
    job_id: str
    actor: ActorShown
    changes: dict[str, str] = Field(description="key (a snapshot kind, or policy) -> id")
    declared_snapshot_ids: dict[SnapshotKind, str | None]
    verdict: WhatIfVerdict
    authoritative: Literal[False]
    error: WhatIfError | None
    first_change: DivergenceShown | None = Field(description="null: no decision changed")
    differences: list[DivergenceShown] = Field(description="every difference, first to last")
    not_redecided: list[NotRedecided]
    not_redecided_why: str
    totals: WhatIfTotals
    replay: ReplayReport = Field(
        description="the replay under the changes (or, when the job's own replay failed, that)"
    )


class ExpectedChangeShown(ResponseModel):
    job_id: str
    field: str


class FirstChangeOfJob(DivergenceShown):
    """A job's first changed decision, and whether the batch expected it."""

    expected: bool


class FirstChangeOfBatch(FirstChangeOfJob):
    """The batch's first change: its first unexpected one, else its first."""

    job_id: str


class WhatIfJobError(ResponseModel):
    """Why a job's what-if did not run: any code of the error table (NOT_FOUND for a job the
    tenant does not hold, INTEGRITY_FAILURE, ...), or why an open job was skipped."""

    code: str
    message: str


class WhatIfJobRow(ResponseModel):
    """One job of a batch: its verdict and first change, not its whole what-if."""

    job_id: str | None = Field(description="null: a JobStarted that does not verify")
    tenant: str | None
    verdict: Literal["unchanged", "changed", "failed", "open"] = Field(
        description="open: still being recorded, skipped"
    )
    error: WhatIfJobError | None
    first_change: FirstChangeOfJob | None
    differences: int


class WhatIfSelectionShown(ResponseModel):
    tenant: str | None
    since: int
    until: int | None = Field(description="the head when the batch began, unless named")
    jobs: list[str] | None


class WhatIfBatchTotals(ResponseModel):
    jobs: int
    unchanged: int
    changed: int
    unexpected: int
    failed: int
    open: int


class WhatIfBatchAnswer(ResponseModel):
    """A batch what-if, recorded once (``record_id``): never authoritative."""

    record_id: str = Field(description="the signed counterfactual record that keeps it")
    report_version: Literal[1]
    kind: Literal["whatif_batch"]
    kind_version: Literal[1]
    actor: ActorShown
    changes: dict[str, str] = Field(description="key (a snapshot kind, or policy) -> id")
    selection: WhatIfSelectionShown
    expected: list[ExpectedChangeShown]
    verdict: BatchVerdict = Field(description="unchanged and expected pass a CI gate")
    authoritative: Literal[False]
    first_change: FirstChangeOfBatch | None
    expected_not_seen: list[ExpectedChangeShown]
    totals: WhatIfBatchTotals
    jobs: list[WhatIfJobRow] = Field(description="one row a selected job, in selection order")


class WhatIfRecordAnswer(ResponseModel):
    """A recorded what-if (any kind), verified, as it was recorded."""

    record_id: str
    kind: str = Field(description="whatif (one job), whatif_batch, ...")
    kind_version: int
    tenant: str
    actor_id: str
    roles: list[str]
    parameters: dict[str, JsonValue]
    outcome: str = Field(description="the report's verdict")
    totals: dict[str, int]
    report: dict[str, JsonValue] = Field(
        description="what the route that ran it answered, without record_id"
    )
    authoritative: Literal[False]
    recorded_at: str = Field(description="when it was asked (ops metadata)")
