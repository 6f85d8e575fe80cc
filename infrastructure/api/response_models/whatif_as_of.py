"""What ``POST /v1/whatif`` answers when it is asked ``as_of`` (and ``compare_to``), as ``mace
replay JOB --as-of N [--compare-to M] --json`` prints it: the job's memory reads served as of a
point (or two, diffed), data drift apart from policy drift, never authoritative."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from domain.errors import ErrorCode
from infrastructure.api.response_models import ResponseModel
from infrastructure.api.response_models.replays import DivergenceShown, ReplayReport
from infrastructure.api.response_models.whatif import (
    NotRedecided,
    WhatIfAnswer,
    WhatIfTotals,
)


class PointShown(ResponseModel):
    """A point as asked (a checkpoint number or a log position) and where the store placed it."""

    checkpoint: int | None = Field(default=None, description="the checkpoint asked for")
    position: int | None = Field(default=None, description="the log position asked for")
    log_position: int = Field(description="the notification id the point stands for")
    memory_version: int = Field(description="the tenant's memory log version there (0: empty)")


class Served(ResponseModel):
    retrievals: int = Field(description="retrievals served again from the tenant's memory log")
    sem_reads: int = Field(description="SEM reads re-read from the tenant's SEM log")


class HitShown(ResponseModel):
    """A retrieval's hit, as served or recorded."""

    uri: str
    score: float
    explain: dict[str, str | int | float | bool | None] = Field(
        description="rank and log position; an emitter may explain more"
    )


class Rescored(ResponseModel):
    uri: str
    as_of: float
    compare_to: float


class HitsDiff(ResponseModel):
    """Two points' hits matched by memory URI, as a receipt diff matches entries by memory."""

    added: list[HitShown]
    removed: list[HitShown]
    common: int
    rescored: list[Rescored] = Field(description="scores apart beyond epsilon")
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


class CounterfactualAnswer(WhatIfAnswer):
    """A counterfactual, recorded (``record_id``), never authoritative: a what-if (``kind``
    whatif: ``changes``, ``differences``, ``not_redecided``) or an as-of (``kind`` as_of, one
    point; compare, two: ``as_of``, ``compare_to``, ``served``, ``data_drift``...)."""

    kind: Literal["whatif", "as_of", "compare"]  # type: ignore[assignment]
    changes: dict[str, str] | None = Field(  # type: ignore[assignment]
        default=None, description="a what-if: key (a snapshot kind, or policy) -> id"
    )
    differences: list[DivergenceShown] | None = Field(  # type: ignore[assignment]
        default=None, description="a what-if: every difference, first to last"
    )
    not_redecided: list[NotRedecided] | None = None  # type: ignore[assignment]
    not_redecided_why: str | None = None  # type: ignore[assignment]
    first_change: DivergenceShown | PointsDiffer | None = Field(  # type: ignore[assignment]
        description="null: nothing changed"
    )
    totals: WhatIfTotals | AsOfTotals  # type: ignore[assignment]
    as_of: PointShown | None = Field(default=None, description="an as-of: the (first) point")
    compare_to: PointShown | None = Field(default=None, description="a compare: the second")
    served: Served | None = None
    not_served: list[NotRedecided] | None = Field(
        default=None, description="an as-of: memory reads not served as of the point"
    )
    nothing_read: str | None = Field(
        default=None, description="an as-of: set when the job read nothing from memory"
    )
    data_drift: list[DivergenceShown | PointsDiffer] | None = None
    consequences: list[DivergenceShown | PointsDiffer] | None = Field(
        default=None, description="an as-of: differences in decisions made on what memory served"
    )
    policy_drift: PolicyDrift | None = None
    replay_compared: ReplayReport | None = Field(
        default=None, description="a compare: the replay as of compare_to"
    )
