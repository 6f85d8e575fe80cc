"""What ``POST /v1/jobs/{id}/fork`` answers (and ``mace fork --json`` prints): the new job, its
lineage, what it kept of the original and each decision it made differently, in the replay's
diff envelope (``recorded``: the original's value, ``replayed``: the fork's)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from infrastructure.api.response_models import ResponseModel
from infrastructure.api.response_models.governance import ActorShown
from infrastructure.api.response_models.replays import DivergenceShown
from projections.whatif import WhatIfVerdict


class ForkedFrom(ResponseModel):
    """The fork's lineage, as its start records it (`domain.fork`)."""

    lineage_version: Literal[1]
    job_id: str
    iteration: int
    prefix_snapshot_ids: dict[str, str] = Field(description="what the kept iterations ran under")
    changes: dict[str, str]
    input: str | None


class ForkKept(ResponseModel):
    iterations: int
    events: int
    how: str


class ForkTotals(ResponseModel):
    differences: int
    iterations_changed: int
    job_level_changes: int = Field(description="differences of the whole job (iteration null)")
    iterations_kept: int
    iterations_rerun: int


class ForkAnswer(ResponseModel):
    """A fork, recorded as job ``fork_job_id`` and in a counterfactual record (``record_id``):
    never authoritative."""

    record_id: str = Field(description="the signed counterfactual record that keeps it")
    report_version: Literal[1]
    kind: Literal["fork"]
    kind_version: Literal[1]
    tenant: str
    job_id: str
    fork_job_id: str = Field(description="the new job: replay, verify or export it as any job")
    forked_from: ForkedFrom
    actor: ActorShown
    changes: dict[str, str]
    verdict: WhatIfVerdict
    authoritative: Literal[False]
    error: None
    first_change: DivergenceShown | None = Field(description="null: no decision changed")
    differences: list[DivergenceShown]
    kept: ForkKept
    totals: ForkTotals
