"""Runs uploaded over the network: open, send events in batches, complete (the HTTP use cases).

The run lives as a `RunDraft` until completion, which records it as one sealed job in the same
transaction that marks the draft complete. Every step is idempotent for a client that re-sends
after a lost response: the same start, the same batch (by event id) and the same completion
answer as the first time did, and nothing is stored twice. A run belongs to its tenant: run ids
are scoped by tenant in storage, so another tenant's run of the same id is simply not there, and
the id is as free to this tenant as one nobody holds.

A run's start, each batch and its completion are held to the run's privacy rules
(`privacy_rules`) before anything is written. The Python `RunRecorder` records through the same
drafts, one event at a time, so a run whose emitter dies stays open with every event it emitted;
an operator lists open runs (`read_model_sync`) and abandons them (`abandon`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from eventsourcing.persistence import IntegrityError, RecordConflictError
from pydantic import ValidationError

from domain.aggregate import MaceAggregate
from domain.determinism import derive_id
from domain.errors import ConflictError, IntegrityFailure, StoreBusyError
from domain.events import (
    EMITTED_TYPES,
    INGEST_LINE,
    READ_BACK,
    RunCompleted,
    RunEvent,
    RunStarted,
)
from domain.governance import Actor, Role, require_any
from domain.job import DEFAULT_TENANT
from domain.run_draft import BatchOutcome, RunDraft, RunDraftError, held_out_of_place
from domain.tool_boundary import ToolBoundaryError
from infrastructure.application.jobs import JobService
from infrastructure.application.limits import InputLimits
from infrastructure.application.runs import RunService
from infrastructure.application.tenancy import StandIn, holds, require_holder
from infrastructure.storage.store import LedgerStore
from projections.reflective_log import ReflectiveLog


def run_id_of(started: RunStarted, tenant: str, count: int = 0) -> str:
    """The emitter's job id, else one derived from seed, tenant and input (stable on re-send);
    ``count`` numbers the runs of one start, as seed 004 D3 numbers jobs of one input."""
    if started.job_id is not None:
        return started.job_id
    return "run-" + derive_id(started.seed_text, "run", f"{tenant}:{started.input}", count)[:32]


class RunUploads:
    def __init__(self, store: LedgerStore, runs: RunService, jobs: JobService) -> None:
        self.store = store
        self.runs = runs
        self.jobs = jobs
        self._stand_in = StandIn(store, _stand_in_run)

    def open(self, started: RunStarted, tenant: str) -> tuple[RunDraft, bool]:
        """Open a run; the same start re-sent returns the open run. True when newly opened."""
        self.runs.privacy.refuse_clear_private_values(started.declared_ids, [started])
        run_id = run_id_of(started, tenant)
        fresh = RunDraft(run_id=run_id, tenant=tenant, started=started.model_dump(mode="json"))
        existing = self._existing(run_id, tenant)
        if existing is None:
            if self.jobs.exists(run_id, tenant=tenant):
                raise ConflictError(f"job {run_id} already exists")
            try:
                self.store.save(fresh)
            except (IntegrityError, RecordConflictError):
                existing = self._existing(run_id, tenant)  # opened by a request racing this one
            else:
                return fresh, True
        if existing is None:
            raise StoreBusyError(f"run {run_id} changed concurrently; try again")
        if existing.start_digest() != fresh.start_digest():
            raise ConflictError(f"run {run_id} already exists with another start")
        return existing, False

    def open_new(self, started: RunStarted, tenant: str) -> RunDraft:
        """Open a run nobody holds yet (the `RunRecorder`'s). A given job id must be free (of
        runs and jobs); without one, the first run id of the start (``run_id_of``'s ``count``)
        that no run, open, completed or abandoned, holds."""
        if started.job_id is not None:
            draft, fresh = self.open(started, tenant)
            if not fresh:
                raise ConflictError(f"run {draft.run_id} is already {draft.status}")
            return draft
        self.runs.privacy.refuse_clear_private_values(started.declared_ids, [started])
        count = 0
        while True:
            draft, fresh = self._open_at(started, tenant, count)
            if fresh:
                return draft
            count += 1

    def _open_at(self, started: RunStarted, tenant: str, count: int) -> tuple[RunDraft, bool]:
        run_id = run_id_of(started, tenant, count)
        held = self._existing(run_id, tenant)
        if held is not None:
            return held, False
        fresh = RunDraft(run_id=run_id, tenant=tenant, started=started.model_dump(mode="json"))
        try:
            self.store.save(fresh)
        except (IntegrityError, RecordConflictError):
            return fresh, False  # opened by a recorder racing this one: count on
        return fresh, True

    def get(self, run_id: str, tenant: str) -> RunDraft:
        draft = self._existing(run_id, tenant)
        require_holder(tenant, None if draft is None else draft.tenant, f"run {run_id}")
        assert draft is not None
        return draft

    def append(
        self,
        run_id: str,
        tenant: str,
        batch: Sequence[tuple[str, RunEvent]],
        limits: InputLimits | None = None,
    ) -> BatchOutcome:
        """Add a batch of ``(event_id, event)``; events held already (same id and content) skip.

        `RunTooLarge`, nothing written, when the run would hold more than ``limits`` (by default
        the ledger's) let a run hold.
        """
        limits = limits or self.runs.limits
        limits.check_batch(len(batch))
        return self._append(run_id, tenant, batch, limits, None)[0]

    def extend(self, draft: RunDraft, batch: Sequence[tuple[str, RunEvent]]) -> RunDraft:
        """`append` to a run whose draft the caller holds as last saved (a recorder's own run),
        held to the ledger's limits: nothing is read unless another writer (an operator
        abandoning it) moved it since. Returns the draft as it now stands."""
        return self._append(draft.run_id, draft.tenant, batch, self.runs.limits, draft)[1]

    def _append(
        self,
        run_id: str,
        tenant: str,
        batch: Sequence[tuple[str, RunEvent]],
        limits: InputLimits,
        held: RunDraft | None,
    ) -> tuple[BatchOutcome, RunDraft]:
        pairs = [(event_id, event.model_dump(mode="json")) for event_id, event in batch]
        unread = [] if held is None else [held]  # the first attempt trusts the held draft

        def attempt() -> tuple[BatchOutcome, RunDraft]:
            draft = unread.pop() if unread else self.get(run_id, tenant)
            declared = RunStarted.model_validate(draft.started).declared_ids
            self.runs.privacy.refuse_clear_private_values(declared, [event for _, event in batch])
            outcome = draft.append(pairs, partial(limits.check_added, f"run {run_id}"))
            self.store.save(draft)
            return outcome, draft

        return self.store.racing(attempt, f"events for run {run_id}")

    def complete(
        self, run_id: str, tenant: str, final_output: Any, *, job_id_is_run_id: bool = True
    ) -> tuple[ReflectiveLog, int]:
        """Record the run as a sealed job; completing it again with the same output is a no-op.

        Returns the job's log and how many events the run sent. `ClearPrivateValue`, nothing
        written, for a final output holding personal data. The job's id is the run's; with
        ``job_id_is_run_id`` False (a `RunRecorder`'s run), the start's job id, or without one
        seed 004 D3's, as a run recorded whole gets.
        """
        draft = self.get(run_id, tenant)
        sent = len(draft.events)
        if not draft.completed:
            pinned = {"job_id": run_id} if job_id_is_run_id else {}
            started = RunStarted.model_validate({**draft.started, **pinned})
            completed = RunCompleted(final_output=final_output)
            self.runs.privacy.refuse_clear_private_values(started.declared_ids, [completed])
            events = _held_events(run_id, draft.events)
            unchanged = [draft]  # the first attempt completes the draft just read

            def completed_draft(job_id: str) -> Sequence[MaceAggregate]:
                again = unchanged.pop() if unchanged else self.get(run_id, tenant)
                if len(again.events) != sent:
                    # A batch landed since the events to record were read: they would be lost.
                    msg = f"run {run_id} received events while being completed; complete it again"
                    raise ConflictError(msg)
                again.complete(final_output)
                return [again]

            try:
                log = self.runs.record(
                    started, events, completed, tenant, completed_draft, sizes=draft.sizes
                )
                return log, sent
            except ToolBoundaryError as bad:  # held since before the pairing was checked
                raise RunDraftError(held_out_of_place(run_id, bad.position, str(bad))) from None
            except ConflictError:
                # A completion racing this one may have got there first: then answer as it did.
                draft = self.get(run_id, tenant)
                if not draft.completed:
                    raise
        draft.complete(final_output)  # refuses another final output; the same one changes nothing
        return self.jobs.reflective_log(run_id, tenant=tenant), sent

    def abandon(self, run_id: str, tenant: str, actor: Actor, reason: str) -> RunDraft:
        """Close an open run without a job, recorded as abandoned by ``actor`` for ``reason``
        (its emitter is gone); abandoning it again changes nothing. A completed run refuses.
        An operator's or an admin's act (`AccessDenied` for anyone else)."""
        require_any(actor, (Role.OPERATOR, Role.ADMIN))

        def attempt() -> RunDraft:
            draft = self.get(run_id, tenant)
            if draft.abandon(actor.as_json(), reason):
                self.store.save(draft)
            return draft

        return self.store.racing(attempt, f"abandon run {run_id}")

    def _existing(self, run_id: str, tenant: str) -> RunDraft | None:
        """The tenant's run of this id, verified in full; None when the tenant has none.

        A default-tenant name may hold another tenant's run opened before ids were scoped:
        whose the run is is read from its first record alone, as for a free id a stand-in's
        (`tenancy.StandIn`), and only the tenant's own run is verified and decoded whole."""
        stream = RunDraft.id_in(tenant, run_id)
        records = self.store.recorder.select_events(stream)
        opened = self._stand_in.first(records)
        if opened is None:
            return None
        if not isinstance(opened, RunDraft.Opened):
            raise IntegrityFailure(stream, 1, "stream is not a RunDraft")
        if not holds(tenant, opened.tenant):
            return None
        return self.store.repository.aggregate(RunDraft, stream, records)


def _stand_in_run() -> RunDraft:
    """A run opened as most are, never stored: what the lookup of a free id checks and decodes
    in place of another tenant's run's first record (`tenancy.StandIn`)."""
    started = RunStarted(seed="stand-in", input="stand-in")
    return RunDraft(
        run_id="stand-in", tenant=DEFAULT_TENANT, started=started.model_dump(mode="json")
    )


def _held_events(run_id: str, contents: Sequence[dict[str, Any]]) -> list[RunEvent]:
    """The run's held events, validated as they are now: `RunDraftError` naming the first that
    fails (taken in before that check), as no batch can mend it. Their tool and retrieval
    pairing is checked where the run is recorded (`RunService.record`)."""
    events = []
    for position, content in enumerate(contents):
        try:
            events.append(_emitted(content))
        except ValidationError as exc:
            message = f"{exc.errors()[0]['msg']}"
            raise RunDraftError(held_out_of_place(run_id, position, message)) from None
    return events


def _emitted(content: dict[str, Any]) -> RunEvent:
    event: RunEvent = INGEST_LINE.validate_python(content, context={READ_BACK: True})
    assert isinstance(event, EMITTED_TYPES)
    return event
