"""The what-if record: one counterfactual run over recorded history, in one signed event.

A what-if re-runs a recorded job under changes it was not recorded under; it proves nothing about
the job and changes nothing of it, so its record is never authoritative and lives in its own
stream, not in the job's governance record (no replay of the job is made or unmade by it).

One event type for every kind of counterfactual (issue 31): ``kind`` names it (``whatif`` for
one job, ``whatif_batch`` for a batch, ``as_of`` and ``compare`` for one job served memory as of
one point or two; ``fork`` is to be recorded the same way), ``kind_version`` the version of that
kind's ``parameters`` and ``report`` shapes, so a kind can grow without a new event type. A
reader switches on ``(kind, kind_version)``; a change to the fields every kind shares bumps
``class_version`` with an ``upcast_v1_v2``, as `ReplayRecord.Opened` does.

No store-wide counter numbers the records: a record is named, as an audit record is
(`domain.audit_record`), by a digest of what it says (and when it was asked: the same what-if is
asked again and again) and the first number free under it.
"""

from __future__ import annotations

from typing import Any, Final

from eventsourcing.domain import event

from domain.aggregate import MaceAggregate

WHATIF_KIND: Final = "whatif"
WHATIF_KIND_VERSION: Final = 1
"""1: ``parameters`` ``{"job_id", "changes": {key: id}}``; ``report`` as `projections.whatif`
writes it (``report_version`` 1)."""

WHATIF_BATCH_KIND: Final = "whatif_batch"
WHATIF_BATCH_KIND_VERSION: Final = 1
"""1: ``parameters`` ``{"changes", "selection": {"tenant", "since", "until", "jobs"},
"expected"}``; ``report`` as `projections.whatif_batch` writes it (``report_version`` 1): one
row per job (its first change, not its whole what-if), the totals, the batch's first change."""

FORK_KIND: Final = "fork"
FORK_KIND_VERSION: Final = 1
"""1: ``parameters`` ``{"job_id", "iteration", "changes", "input", "fork_job_id"}``; ``report``
as `projections.fork` writes it (``report_version`` 1): the fork's differences from the job it
forked, what it kept."""


AS_OF_KIND: Final = "as_of"
AS_OF_KIND_VERSION: Final = 1
"""1: ``parameters`` ``{"job_id", "as_of": {"checkpoint"|"position": N}}``; ``report`` as
`projections.as_of` writes it (``report_version`` 1)."""

COMPARE_KIND: Final = "compare"
COMPARE_KIND_VERSION: Final = 1
"""1: ``parameters`` ``{"job_id", "as_of", "compare_to"}`` (each ``{"checkpoint"|"position":
N}``); ``report`` as `projections.as_of` writes it (``report_version`` 1)."""


class CounterfactualRecord(MaceAggregate):
    NAME_PREFIX = "counterfactual"
    NAME_FIELD = "record_id"

    class Recorded(MaceAggregate.Created):
        record_id: str
        kind: str
        kind_version: int
        tenant: str
        actor_id: str
        roles: list[str]
        parameters: dict[str, Any]
        outcome: str
        totals: dict[str, int]
        report: dict[str, Any]
        authoritative: bool
        recorded_at: str  # when the actor asked (ops metadata, never decision input)

    @event(Recorded)
    def __init__(
        self,
        record_id: str,
        kind: str,
        kind_version: int,
        tenant: str,
        actor_id: str,
        roles: list[str],
        parameters: dict[str, Any],
        outcome: str,
        totals: dict[str, int],
        report: dict[str, Any],
        authoritative: bool,
        recorded_at: str,
    ) -> None:
        self.record_id = record_id
        self.kind = kind
        self.kind_version = kind_version
        self.tenant = tenant
        self.actor_id = actor_id
        self.roles = list(roles)
        self.parameters = dict(parameters)
        self.outcome = outcome
        self.totals = dict(totals)
        self.report = dict(report)
        self.authoritative = authoritative
        self.recorded_at = recorded_at
