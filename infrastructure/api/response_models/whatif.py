"""What ``POST /v1/whatif`` answers (and ``mace replay JOB --with ... --json`` prints): the
what-if's verdict, each changed decision in the replay's diff envelope, what it could not decide
again, and the replay it ran under the changes."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from domain.errors import ErrorCode
from domain.snapshot import SnapshotKind
from infrastructure.api.response_models import ResponseModel
from infrastructure.api.response_models.governance import ActorShown
from infrastructure.api.response_models.replays import DivergenceShown, ReplayReport
from projections.replay_checks import Check
from projections.whatif import WhatIfVerdict


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
