"""The read models: what operators list and dashboards show, derived from the ordered event log.

Six views, each a set of JSON rows by key:

- ``job_index``: every job, by its stream id: job id, tenant, position (its start's notification
  id: the jobs in that order are the order the store recorded them), status, capture mode,
  replayability and missing artifacts, and its latest replay (``replay_attempt``;
  ``replayed_at``, when it was asked for; ``replay_outcome``; ``replay_error``, its error code):
  what the dashboard filters on;
- ``non_replayable``: the jobs production replay cannot redo, and what each lacks;
- ``replay_outcomes``: every replay attempt (``<job_id>#<attempt>``, the job's id scoped by its
  tenant): who, which mode, outcome;
- ``halted_snapshots``: snapshots under FORCE_HALT_REPLAY, whose halt (a tenant's, or store-wide:
  ``tenant`` null) and why, by the tenant's governance scope (store-wide: ``<snapshot_id>``);
- ``receipt_index``: each tenant's receipts numbered from 0 in emission (commit) order, under
  `receipt_key` (receipt id, parent, position), and under the tenant's name how many it has;
- ``open_runs``: every run recorded from outside (HTTP batches, `RunRecorder`) that is neither
  completed nor abandoned, by its draft's stream id: run id, tenant, position, events held.
- ``audit_records``: every batch audit's signed summary, by its stream id: who, for which tenant
  (null: every one), which part of the log, its totals by job status, what it checked and what
  it could not, when, and its position in the log.

A deleted snapshot produces no event, so no event can tell the views that a job lost one: the
job index keeps each job's declared snapshots, and `with_gone_snapshots` lays over the rows, when
they are read, what a presence check of the snapshots its completion found says now (snapshots
are never removed, so one of those that is gone was deleted: the job is not replayable).

`view_changes` says how one event changes the views, given a way to read a row's current value;
it is the whole projection, and it is pure. Where the rows live and how far the log has been
applied (the tracking record, in the same transaction) is the infrastructure's concern. A view's
digest is the SHA-256 of the canonical JSON of its rows in key order, so a rebuild from position 0
can be compared with the live view byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from eventsourcing.utils import get_topic

from domain.audit_record import AuditRecord
from domain.canonical import digest
from domain.capture import snapshots_found_at_completion
from domain.errors import ErrorCode
from domain.events import JobCompleted
from domain.governance import Governance, ReplayRequestFields, governance_scope_of_snapshot
from domain.job import Job
from domain.naming import tenant_and_key, tenant_scoped
from domain.receipt import Receipt
from domain.run_draft import RunDraft

JOB_INDEX: Final = "job_index"
NON_REPLAYABLE: Final = "non_replayable"
REPLAY_OUTCOMES: Final = "replay_outcomes"
HALTED_SNAPSHOTS: Final = "halted_snapshots"
RECEIPT_INDEX: Final = "receipt_index"
OPEN_RUNS: Final = "open_runs"
AUDIT_RECORDS: Final = "audit_records"
VIEWS: Final = (
    JOB_INDEX,
    NON_REPLAYABLE,
    REPLAY_OUTCOMES,
    HALTED_SNAPSHOTS,
    RECEIPT_INDEX,
    OPEN_RUNS,
    AUDIT_RECORDS,
)
PROJECTION: Final = ("read_model", "projection")
"""Where the views keep which projection made them (view, key): not one of the `VIEWS`."""
PROJECTION_VERSION: Final = 6
"""Raised whenever `view_changes` changes what it makes from the same events (2: job positions,
the receipt index; 3: a replay outcome is ok only when it reproduced; 4: open runs; 5: each job's
latest replay, the audit records; 6: an abandoned run's job), so that views a store kept from
before are made again from position 0."""


Row = dict[str, Any]
RowReader = Callable[[str, str], Row | None]


@dataclass(frozen=True, slots=True)
class ViewChange:
    """Set a view's row under a key (``row=None``: delete it)."""

    view: str
    key: str
    row: Row | None


Merge = Callable[..., ViewChange]
"""``merge(view, key, **update)``: the row's current value with ``update`` laid over it."""


def view_changes(event: object, current: RowReader, position: int) -> list[ViewChange]:
    """How one stored event, at ``position`` in the notification log, changes the read models."""

    def merge(view: str, key: str, **update: Any) -> ViewChange:
        return ViewChange(view, key, {**(current(view, key) or {}), **update})

    handler = _HANDLERS.get(type(event))
    return [] if handler is None else handler(event, merge, position)


def _job_started(event: Job.Started, merge: Merge, position: int) -> list[ViewChange]:
    return [
        merge(
            JOB_INDEX,
            str(event.originator_id),
            job_id=event.job_id,
            tenant=event.tenant,
            position=position,
            status="open",
            capture_mode=event.capture_mode,
            snapshot_ids=event.snapshot_ids,
            replayable=None,
            missing_artifacts=[],
        )
    ]


def _job_recorded(event: Job.Recorded, merge: Merge, position: int) -> list[ViewChange]:
    if event.event_type != JobCompleted.EVENT_TYPE:
        return []
    replayable = bool(event.payload["replayable"])
    missing = event.payload["missing_artifacts"]
    key = str(event.originator_id)
    indexed = merge(
        JOB_INDEX, key, status="completed", replayable=replayable, missing_artifacts=missing
    )
    if replayable:
        return [indexed]
    assert indexed.row is not None
    gap = {
        "job_id": indexed.row.get("job_id"),
        "tenant": indexed.row.get("tenant"),
        "missing_artifacts": missing,
    }
    return [indexed, ViewChange(NON_REPLAYABLE, key, gap)]


def with_gone_snapshots(
    job_index: list[tuple[str, Row]], present: Callable[[str], bool]
) -> tuple[list[tuple[str, Row]], list[tuple[str, Row]]]:
    """The job index, and the non-replayable jobs it adds, with every snapshot a completed job
    found in the ledger and that ``present`` says is gone listed as missing."""
    rows: list[tuple[str, Row]] = []
    gaps: list[tuple[str, Row]] = []
    for key, row in job_index:
        if row.get("replayable") is None:
            rows.append((key, row))
            continue
        found = snapshots_found_at_completion(row.get("snapshot_ids", {}), row["missing_artifacts"])
        gone = [
            _gone_snapshot(kind, sid) for kind, sid in sorted(found.items()) if not present(sid)
        ]
        if not gone:
            rows.append((key, row))
            continue
        missing = [*row["missing_artifacts"], *gone]
        rows.append((key, {**row, "replayable": False, "missing_artifacts": missing}))
        gap = {"job_id": row.get("job_id"), "tenant": row.get("tenant")}
        gaps.append((key, {**gap, "missing_artifacts": missing}))
    return rows, gaps


def _gone_snapshot(kind: str, snapshot_id: str) -> Row:
    return {
        "sequence_index": None,
        "event_type": "JobStarted",
        "step": f"{kind} snapshot",
        "missing": ["snapshot"],
        "reason": f"snapshot {snapshot_id} was in the ledger when the job completed and is gone",
    }


def _job_sealed(event: Job.Sealed, merge: Merge, position: int) -> list[ViewChange]:
    return [merge(JOB_INDEX, str(event.originator_id), status="sealed")]


def _replay_requested(event: ReplayRequestFields, merge: Merge, position: int) -> list[ViewChange]:
    # A replay event names the job by its scoped id, which names its stream. The job is indexed
    # before anyone can ask to replay it: its row says whose job it is.
    indexed = str(Job.id_for(event.job_id))
    job = merge(JOB_INDEX, indexed).row or {}
    row = {
        "job_id": tenant_and_key(event.job_id)[1],
        "tenant": job.get("tenant"),
        "attempt": event.attempt,
        "mode": event.mode,
        "force_continue": event.force_continue,
        "actor_id": event.actor_id,
        "roles": event.roles,
        "requested_at": event.recorded_at,
        "finished_at": None,
        "elapsed_ms": None,
        "outcome": "pending",
        "error_code": None,
        "authoritative": None,
        "divergences": None,
    }
    replay = ViewChange(REPLAY_OUTCOMES, f"{event.job_id}#{event.attempt}", row)
    latest = {
        "replay_attempt": event.attempt,
        "replayed_at": event.recorded_at,
        "replay_outcome": "pending",
        "replay_error": None,
    }
    return [replay, merge(JOB_INDEX, indexed, **latest)] if job else [replay]


def _replay_resulted(
    event: Governance.ReplayResulted, merge: Merge, position: int
) -> list[ViewChange]:
    outcome = merge(
        REPLAY_OUTCOMES,
        f"{event.job_id}#{event.attempt}",
        finished_at=event.recorded_at,
        elapsed_ms=event.elapsed_ms,
        outcome=_outcome(event),
        error_code=event.error_code,
        authoritative=event.authoritative,
        divergences=event.divergences,
    )
    indexed = str(Job.id_for(event.job_id))
    job = merge(JOB_INDEX, indexed).row or {}
    assert outcome.row is not None
    if job.get("replay_attempt") != event.attempt:
        return [outcome]  # an older attempt's result: the job's latest replay stays as it is
    latest = {"replay_outcome": outcome.row["outcome"], "replay_error": event.error_code}
    return [outcome, merge(JOB_INDEX, indexed, **latest)]


def _outcome(event: Governance.ReplayResulted) -> str:
    """ok (reproduced), not_reproduced (no error stopped it, yet it re-executed nothing, or, for
    a result recorded before results said so, nothing shows it reproduced: the event's upcast),
    failed, or refused: a replay the caller's roles did not allow never ran."""
    if event.ok:
        return "ok"
    if event.error_code is None:
        return "not_reproduced"
    return "refused" if event.error_code == ErrorCode.ACCESS_DENIED.value else "failed"


def _halt_set(event: Governance.HaltSet, merge: Merge, position: int) -> list[ViewChange]:
    halt = {
        "snapshot_id": event.snapshot_id,
        "tenant": event.tenant,
        "cause": event.cause,
        "reason": event.reason,
        "actor_id": event.actor_id,
        "halted_at": event.recorded_at,
    }
    return [ViewChange(HALTED_SNAPSHOTS, _halt_key(event.snapshot_id, event.tenant), halt)]


def _halt_cleared(event: Governance.HaltCleared, merge: Merge, position: int) -> list[ViewChange]:
    return [ViewChange(HALTED_SNAPSHOTS, _halt_key(event.snapshot_id, event.tenant), None)]


def _receipt_emitted(event: Receipt.Emitted, merge: Merge, position: int) -> list[ViewChange]:
    tenant = str(event.body["tenant"])
    counted = merge(RECEIPT_INDEX, tenant)
    number = int((counted.row or {}).get("count", 0))
    entry = {
        "number": number,
        "receipt_id": event.receipt_id,
        "parent_receipt_id": event.body["parent_receipt_id"],
        "position": position,
    }
    return [
        merge(RECEIPT_INDEX, tenant, count=number + 1),
        ViewChange(RECEIPT_INDEX, receipt_key(tenant, number), entry),
    ]


def _run_opened(event: RunDraft.Opened, merge: Merge, position: int) -> list[ViewChange]:
    row = {"run_id": event.run_id, "tenant": event.tenant, "position": position, "events": 0}
    if event.job_id is not None:
        # The job index key of the job the run records into (opened with it), for its
        # abandonment to mark (`_run_abandoned`).
        row["job"] = str(Job.id_for(tenant_scoped(event.tenant, event.job_id)))
    return [ViewChange(OPEN_RUNS, str(event.originator_id), row)]


def _run_batch(
    event: RunDraft.BatchAppended | RunDraft.BatchIndexed, merge: Merge, position: int
) -> list[ViewChange]:
    held = merge(OPEN_RUNS, str(event.originator_id))  # open: a closed run takes no batch
    assert held.row is not None
    taken = len(event.events if isinstance(event, RunDraft.BatchAppended) else event.entries)
    return [merge(OPEN_RUNS, held.key, events=int(held.row["events"]) + taken)]


def _run_completed(event: RunDraft.Completed, merge: Merge, position: int) -> list[ViewChange]:
    return [ViewChange(OPEN_RUNS, str(event.originator_id), None)]


def _run_abandoned(event: RunDraft.Abandoned, merge: Merge, position: int) -> list[ViewChange]:
    """An abandoned run's job is never completed nor sealed: listed ``abandoned``, not open."""
    held = merge(OPEN_RUNS, str(event.originator_id)).row or {}
    closed = ViewChange(OPEN_RUNS, str(event.originator_id), None)
    job = held.get("job")
    if job is None:  # a run opened without its job (version 1) holds its events itself
        return [closed]
    return [closed, merge(JOB_INDEX, job, status="abandoned")]


def _audit_recorded(event: AuditRecord.Recorded, merge: Merge, position: int) -> list[ViewChange]:
    fields = event.model_dump(
        mode="json",
        exclude={"originator_id", "originator_version", "timestamp", "originator_topic"},
    )
    return [ViewChange(AUDIT_RECORDS, str(event.originator_id), {**fields, "position": position})]


def receipt_key(tenant: str, number: int) -> str:
    """Where the receipt index keeps the tenant's receipt ``number`` (``|`` is in no tenant)."""
    return f"{tenant}|{number}"


def _halt_key(snapshot_id: str, tenant: str | None) -> str:
    # A store-wide halt keeps the key every halt had before halts were scoped by tenant.
    return snapshot_id if tenant is None else governance_scope_of_snapshot(snapshot_id, tenant)


_HANDLERS: Final[dict[type, Callable[[Any, Merge, int], list[ViewChange]]]] = {
    Job.Started: _job_started,
    Job.Recorded: _job_recorded,
    Job.Sealed: _job_sealed,
    Governance.ReplayRequested: _replay_requested,
    Governance.OpenedByReplay: _replay_requested,
    Governance.ReplayResulted: _replay_resulted,
    Governance.HaltSet: _halt_set,
    Governance.HaltCleared: _halt_cleared,
    Receipt.Emitted: _receipt_emitted,
    RunDraft.Opened: _run_opened,
    RunDraft.BatchAppended: _run_batch,
    RunDraft.BatchIndexed: _run_batch,
    RunDraft.Completed: _run_completed,
    RunDraft.Abandoned: _run_abandoned,
    AuditRecord.Recorded: _audit_recorded,
}
PROJECTED_EVENTS: Final = tuple(_HANDLERS)
TOPICS: Final = tuple(get_topic(cls) for cls in PROJECTED_EVENTS)


def view_digest(rows: Iterable[tuple[str, Row]]) -> str:
    """SHA-256 of the canonical JSON of ``[[key, row], ...]`` in key order."""
    return digest([[key, row] for key, row in sorted(rows, key=lambda pair: pair[0])])
