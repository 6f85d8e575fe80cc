"""What ``POST /v1/whatif`` answers when it is asked ``as_of`` (and ``compare_to``), as ``mace
replay JOB --as-of N [--compare-to M] --json`` prints it: the job's memory reads served as of a
point (or two, diffed), data drift apart from policy drift, never authoritative."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue, RootModel

from domain.errors import ErrorCode
from domain.snapshot import SnapshotKind
from infrastructure.api.response_models import ResponseModel
from infrastructure.api.response_models.governance import ActorShown
from infrastructure.api.response_models.replays import DivergenceShown, ReplayReport
from infrastructure.api.response_models.whatif import NotRedecided, WhatIfAnswer, WhatIfError
from projections.whatif import WhatIfVerdict


class PointShown(ResponseModel):
    """A point as asked (a checkpoint number or a log position) and where the store placed it."""

    checkpoint: int | None = Field(default=None, description="the checkpoint asked for")
    position: int | None = Field(default=None, description="the log position asked for")
    log_position: int = Field(description="the notification id the point stands for")
    memory_version: int = Field(description="the tenant's memory log version there (0: empty)")


class Served(ResponseModel):
    retrievals: int = Field(description="retrievals served again from the tenant's memory log")
    sem_reads: int = Field(description="SEM reads re-read from the tenant's SEM log")


class HitsDiff(ResponseModel):
    """Two points' hits matched by memory URI, as a receipt diff matches entries by memory."""

    added: list[dict[str, JsonValue]]
    removed: list[dict[str, JsonValue]]
    common: int
    rescored: list[dict[str, JsonValue]] = Field(description="scores apart beyond epsilon")
    reranked: bool


class PointsDiffer(ResponseModel):
    """A field the two points served differently (a compare): what each served."""

    code: ErrorCode
    iteration: int | None
    field: str
    recorded: JsonValue
    as_of: JsonValue
    compare_to: JsonValue
    hits: HitsDiff | None = Field(default=None, description="a retrieval's hits: their diff")


class PolicyDrift(ResponseModel):
    differences: list[DivergenceShown] = Field(description="always empty: bundles are held")
    why: str


class AsOfTotals(ResponseModel):
    differences: int
    data_drift: int
    consequences: int
    policy_drift: int


class AsOfAnswer(ResponseModel):
    """An as-of (``kind`` as_of) or compare (``kind`` compare), recorded: never authoritative."""

    record_id: str = Field(description="the signed counterfactual record that keeps it")
    report_version: Literal[1]
    kind: Literal["as_of", "compare"]
    kind_version: Literal[1]
    tenant: str
    job_id: str
    actor: ActorShown
    as_of: PointShown
    compare_to: PointShown | None
    declared_snapshot_ids: dict[SnapshotKind, str | None]
    verdict: WhatIfVerdict
    authoritative: Literal[False]
    error: WhatIfError | None
    served: Served
    not_served: list[NotRedecided] = Field(description="memory reads not served as of the point")
    nothing_read: str | None = Field(description="set when the job read nothing from memory")
    first_change: DivergenceShown | PointsDiffer | None
    data_drift: list[DivergenceShown | PointsDiffer]
    consequences: list[DivergenceShown | PointsDiffer] = Field(
        description="differences in decisions made on what memory served"
    )
    policy_drift: PolicyDrift
    totals: AsOfTotals
    replay: ReplayReport = Field(description="the replay as of the (first) point")
    replay_compared: ReplayReport | None = Field(
        default=None, description="a compare: the replay as of compare_to"
    )


class CounterfactualAnswer(RootModel[WhatIfAnswer | AsOfAnswer]):
    """A what-if's answer (``kind`` whatif) or an as-of's (``kind`` as_of or compare)."""
