"""Fork from a step (issue 31 point 4): a recorded job's iterations before ITERATION kept as
recorded, the rest re-run under changes, recorded as a new job that names its lineage. Pure:
the request, the fork's id and its lineage only.

A fork's lineage is recorded in its own start (`Job.Started.provenance`, under ``forked_from``),
beside the rules the job was recorded under: a replay of the fork reads it with the job, at no
extra read, and the start of every other job keeps its bytes. The lineage carries its own
version (``lineage_version``); `lineage_of` brings an older one up to the current shape, as an
event's ``upcast_vN_vN+1`` does, so that a lineage can grow without a new event class.

The fork's id is derived from what it forks (tenant, job, iteration, changes, input): forking
the same thing again names the same job, which the ledger already holds, so it is refused as a
conflict naming that fork (a job is never created twice); nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from domain.canonical import digest
from domain.errors import InvalidInput
from domain.whatif import WhatIfChanges

LINEAGE_VERSION: Final = 1
"""1: ``{"lineage_version", "job_id", "iteration", "prefix_snapshot_ids", "changes", "input"}``."""
FORK_ID_PREFIX: Final = "fork-"


class ForkCode(StrEnum):
    NOT_REDECIDABLE = "FORK_NOT_REDECIDABLE"
    """The job holds facts a fork cannot decide again (an outside run's tools, models, gates and
    retrievals; SEM a fork would write): it is not forked, nothing is written."""


class NotForkable(ValueError):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.code = ForkCode.NOT_REDECIDABLE


@dataclass(frozen=True, slots=True)
class ForkLineage:
    """Where a fork comes from: the job, the iteration it re-runs from, the snapshots the kept
    iterations were decided under (the original's declared ones), the changes and the input."""

    job_id: str
    iteration: int
    prefix_snapshot_ids: Mapping[str, str]
    changes: Mapping[str, str]
    input: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "lineage_version": LINEAGE_VERSION,
            "job_id": self.job_id,
            "iteration": self.iteration,
            "prefix_snapshot_ids": dict(sorted(self.prefix_snapshot_ids.items())),
            "changes": dict(sorted(self.changes.items())),
            "input": self.input,
        }


def lineage_of(provenance: Mapping[str, Any] | None) -> ForkLineage | None:
    """The lineage a job's recorded rules name; None for a job that is no fork."""
    recorded = None if provenance is None else provenance.get("forked_from")
    if recorded is None:
        return None
    if recorded.get("lineage_version") != LINEAGE_VERSION:
        version = recorded.get("lineage_version")
        msg = f"fork lineage version {version!r} is not one this ledger reads"
        raise InvalidInput(msg)
    return ForkLineage(
        job_id=recorded["job_id"],
        iteration=recorded["iteration"],
        prefix_snapshot_ids=recorded["prefix_snapshot_ids"],
        changes=recorded["changes"],
        input=recorded["input"],
    )


def check_iteration(at: int) -> int:
    if at < 0:
        raise InvalidInput(f"--at {at}: expected an iteration number, 0 or more")
    return at


def fork_changes(changes: WhatIfChanges | None) -> WhatIfChanges:
    """The snapshot changes a fork re-runs under (none: the same snapshots, another input).

    A policy bundle decides an outside run's gates and retrievals, which a fork does not re-run:
    naming one is refused rather than silently doing nothing."""
    if changes is None:
        return WhatIfChanges({})
    if changes.policy_bundle is not None:
        msg = (
            "a fork re-runs Stage-0 iterations, which no policy bundle decides: fork with"
            " --with router=, selfrep=, brainstate=, privacy= or governance= (use mace replay"
            " --with policy= for a what-if of an outside run's gates)"
        )
        raise NotForkable(msg)
    return changes


def fork_job_id(tenant: str, job_id: str, at: int, changes: WhatIfChanges, text: str | None) -> str:
    """The fork's job id: the same job, iteration, changes and input name the same fork."""
    named = {
        "tenant": tenant,
        "job_id": job_id,
        "iteration": at,
        "changes": changes.as_json(),
        "input": text,
    }
    return FORK_ID_PREFIX + digest(named)[:40]
