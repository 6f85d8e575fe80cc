"""Runs uploaded over the network: open, send events in batches, complete (the HTTP use cases).

A run opens its job (`Job`) with its `RunDraft`, the run's index of event ids, in one
transaction; each batch appends its new events to the job's stream, as the job's events, in the
transaction that indexes them, so every event is stored once; completion appends only the job's
completion and seal, in the transaction that marks the draft complete. A run opened before
(a draft holding its events, `RunDraft.job_id` None) is recorded whole at completion, as then.
Every step is idempotent for a client that re-sends
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
from dataclasses import dataclass
from functools import partial
from typing import Any

from eventsourcing.persistence import IntegrityError, RecordConflictError
from pydantic import ValidationError

from domain.aggregate import MaceAggregate
from domain.capture import record_captured
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
from domain.job import DEFAULT_TENANT, Job
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


@dataclass(frozen=True, slots=True)
class HeldRun:
    """A run as its writer last saved it: its draft and, for a run opened with its job, that
    job (None: not read yet, or a draft holding its events)."""

    draft: RunDraft
    job: Job | None = None


class RunUploads:
    def __init__(self, store: LedgerStore, runs: RunService, jobs: JobService) -> None:
        self.store = store
        self.runs = runs
        self.jobs = jobs
        self._stand_in = StandIn(store, _stand_in_run)

    def open(self, started: RunStarted, tenant: str) -> tuple[RunDraft, bool]:
        """Open a run; the same start re-sent returns the open run. True when newly opened."""
        return self._open(started, tenant)[0:2]

    def _open(self, started: RunStarted, tenant: str) -> tuple[RunDraft, bool, Job | None]:
        """`open`, and the job it opened (None for a run opened before)."""
        self.runs.privacy.refuse_clear_private_values(started.declared_ids, [started])
        run_id = run_id_of(started, tenant)
        fresh, job = self._opened(started, tenant, run_id, run_id, derived=False)
        existing = self._existing(run_id, tenant)
        if existing is None:
            if self.jobs.exists(run_id, tenant=tenant):
                raise ConflictError(f"job {run_id} already exists")
            try:
                self.store.save(fresh, job)
            except (IntegrityError, RecordConflictError):
                existing = self._existing(run_id, tenant)  # opened by a request racing this one
            else:
                return fresh, True, job
        if existing is None:
            raise StoreBusyError(f"run {run_id} changed concurrently; try again")
        if existing.start_digest() != fresh.start_digest():
            raise ConflictError(f"run {run_id} already exists with another start")
        return existing, False, None

    def open_new(self, started: RunStarted, tenant: str) -> HeldRun:
        """Open a run nobody holds yet (the `RunRecorder`'s), with its job. A given job id must
        be free (of runs and jobs); without one, the first run id of the start (``run_id_of``'s
        ``count``) that no run, open, completed or abandoned, holds, and its job's id is seed 004
        D3's, decided now."""
        if started.job_id is not None:
            draft, fresh, job = self._open(started, tenant)
            if not fresh:
                raise ConflictError(f"run {draft.run_id} is already {draft.status}")
            return HeldRun(draft, job)
        self.runs.privacy.refuse_clear_private_values(started.declared_ids, [started])
        count = 0
        while True:
            held = self._open_at(started, tenant, count)
            if held is not None:
                return held
            count += 1

    def _open_at(self, started: RunStarted, tenant: str, count: int) -> HeldRun | None:
        """The run of this ``count`` opened; None when a run of that id is held already."""
        run_id = run_id_of(started, tenant, count)
        if self._existing(run_id, tenant) is not None:
            return None
        job_id = self.jobs.id_for(None, started.seed_text, started.input, tenant)
        draft, job = self._opened(started, tenant, run_id, job_id, derived=True)
        try:
            self.store.save(draft, job)
        except (IntegrityError, RecordConflictError):
            return None  # opened by a recorder racing this one (the run, or its job): count on
        return HeldRun(draft, job)

    def _opened(
        self, started: RunStarted, tenant: str, run_id: str, job_id: str, *, derived: bool
    ) -> tuple[RunDraft, Job]:
        """A new run's draft and its job, to be saved together."""
        job = self.runs.opened_job(started, job_id, tenant, derived=derived)
        held = started.model_dump(mode="json")
        return RunDraft(run_id=run_id, tenant=tenant, started=held, job_id=job_id), job

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
        the ledger's) let a run hold. `RefusedSemClaim`, nothing written, for a SEM claim the
        tenant's SEM log contradicts (`RunService.record`), at its position in the batch.
        """
        limits = limits or self.runs.limits
        limits.check_batch(len(batch))
        return self._append(run_id, tenant, batch, limits, None)[0]

    def extend(self, held: HeldRun, batch: Sequence[tuple[str, RunEvent]]) -> HeldRun:
        """`append` to a run the caller holds as last saved (a recorder's own run), held to the
        ledger's limits: nothing is read unless another writer (an operator abandoning it) moved
        it since. Returns the run as it now stands."""
        draft = held.draft
        return self._append(draft.run_id, draft.tenant, batch, self.runs.limits, held)[1]

    def _append(
        self,
        run_id: str,
        tenant: str,
        batch: Sequence[tuple[str, RunEvent]],
        limits: InputLimits,
        held: HeldRun | None,
    ) -> tuple[BatchOutcome, HeldRun]:
        unread = [] if held is None else [held]  # the first attempt trusts the held run

        def attempt() -> tuple[BatchOutcome, HeldRun]:
            run = unread.pop() if unread else HeldRun(self.get(run_id, tenant))
            draft = run.draft
            started = RunStarted.model_validate(draft.started)
            declared = started.declared_ids
            self.runs.privacy.refuse_clear_private_values(declared, [event for _, event in batch])
            check_sizes = partial(limits.check_added, f"run {run_id}")
            if draft.job_id is None:  # a run opened before: its draft holds its events
                pairs = [(event_id, event.model_dump(mode="json")) for event_id, event in batch]
                outcome = draft.append(pairs, check_sizes)
                self.store.save(draft)
                return outcome, run
            job = run.job or self._job_at_head(draft, started)
            outcome = draft.append(
                batch,
                check_sizes,
                lambda taken: self.runs.check_sem_claims(job, [(i, batch[i][1]) for i in taken]),
            )
            record_captured(job, [batch[i][1] for i in outcome.taken])
            self.store.save(draft, job)
            return outcome, HeldRun(draft, job)

        return self.store.racing(attempt, f"events for run {run_id}")

    def _job_at_head(self, draft: RunDraft, started: RunStarted) -> Job:
        """The run's job where its stream stands, the run's index says (`Job.resume`): a batch
        appends to it without reading it (the index, verified, holds what a batch checks: event
        ids, sizes, tool steps). Its start is made again as the run opened it: the same job."""
        assert draft.job_id is not None
        derived = started.job_id is None and draft.job_id != draft.run_id  # a recorder's D3 id
        job = self.runs.opened_job(started, draft.job_id, draft.tenant, derived=derived)
        job.resume(draft.count)
        return job

    def complete(
        self, run_id: str, tenant: str, final_output: Any, *, job_id_is_run_id: bool = True
    ) -> tuple[ReflectiveLog, int]:
        """Record the run as a sealed job; completing it again with the same output is a no-op.

        Returns the job's log and how many events the run sent. `ClearPrivateValue`, nothing
        written, for a final output holding personal data. A run opened with its job closes and
        seals it. A run opened before is recorded whole as its job: the job's id is the run's;
        with ``job_id_is_run_id`` False (a `RunRecorder`'s run), the start's job id, or without
        one seed 004 D3's, as a run recorded whole gets.
        """
        draft = self.get(run_id, tenant)
        sent = draft.count
        job_id = draft.job_id or (run_id if job_id_is_run_id else None)
        if not draft.completed:
            pinned = {} if job_id is None else {"job_id": job_id}
            started = RunStarted.model_validate({**draft.started, **pinned})
            completed = RunCompleted(final_output=final_output)
            self.runs.privacy.refuse_clear_private_values(started.declared_ids, [completed])
            try:
                if draft.job_id is None:
                    return self._record_held(draft, started, completed), sent
                return self._close(draft, started, completed)
            except ToolBoundaryError as bad:  # held since before the pairing was checked
                raise RunDraftError(held_out_of_place(run_id, bad.position, str(bad))) from None
            except ConflictError:
                # A completion racing this one may have got there first: then answer as it did.
                draft = self.get(run_id, tenant)
                if not draft.completed:
                    raise
        draft.complete(final_output)  # refuses another final output; the same one changes nothing
        return self.jobs.reflective_log(job_id or run_id, tenant=tenant), sent

    def _close(
        self, draft: RunDraft, started: RunStarted, completed: RunCompleted
    ) -> tuple[ReflectiveLog, int]:
        """Close and seal a run's job, which holds every event the run took: read once
        (verified), nothing of it written again. A batch that lands meanwhile moves the job on,
        and the completion is made again over it: the log, and how many events the run took."""
        unchanged = [draft]  # the first attempt completes the draft just read

        def attempt() -> tuple[ReflectiveLog, int]:
            again = unchanged.pop() if unchanged else self.get(draft.run_id, draft.tenant)
            assert again.job_id is not None
            job, macs = self.jobs.with_macs(again.job_id, tenant=again.tenant)
            if job.sealed or len(job.facts) != again.count:
                # Only a writer other than this run's could have recorded on its job or sealed it.
                msg = f"job {again.job_id} holds {len(job.facts)} events, run {again.run_id} took"
                raise ConflictError(f"{msg} {again.count}: it cannot be completed")
            again.complete(completed.final_output)
            return self.runs.close(started, job, completed, [again], macs), again.count

        return self.store.racing(attempt, f"complete run {draft.run_id}")

    def _record_held(
        self, draft: RunDraft, started: RunStarted, completed: RunCompleted
    ) -> ReflectiveLog:
        """Record a run whose draft holds its events (opened before runs opened their jobs) as
        one sealed job, in the transaction that marks the draft complete."""
        run_id, tenant, sent = draft.run_id, draft.tenant, draft.count
        events = _held_events(run_id, draft.events)
        unchanged = [draft]  # the first attempt completes the draft just read

        def completed_draft(job_id: str) -> Sequence[MaceAggregate]:
            again = unchanged.pop() if unchanged else self.get(run_id, tenant)
            if again.count != sent:
                # A batch landed since the events to record were read: they would be lost.
                msg = f"run {run_id} received events while being completed; complete it again"
                raise ConflictError(msg)
            again.complete(completed.final_output)
            return [again]

        return self.runs.record(
            started, events, completed, tenant, completed_draft, sizes=draft.sizes
        )

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
