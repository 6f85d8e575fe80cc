"""Runs uploaded over the network: open, send events in batches, complete (the HTTP use cases).

The run lives as a `RunDraft` until completion, which records it as one sealed job in the same
transaction that marks the draft complete. Every step is idempotent for a client that re-sends
after a lost response: the same start, the same batch (by event id) and the same completion
answer as the first time did, and nothing is stored twice. A run belongs to its tenant: run ids
are scoped by tenant in storage, so another tenant's run of the same id is simply not there, and
the id is as free to this tenant as one nobody holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import IntegrityError, RecordConflictError
from pydantic import ValidationError

from domain.aggregate import MaceAggregate
from domain.determinism import derive_id
from domain.errors import ConflictError, NotFoundError, StoreBusyError
from domain.events import EMITTED_TYPES, INGEST_LINE, RunCompleted, RunEvent, RunStarted
from domain.run_draft import BatchOutcome, RunDraft, RunDraftError, held_out_of_place
from domain.tool_boundary import ToolBoundaryError
from infrastructure.application.jobs import JobService
from infrastructure.application.limits import InputLimits
from infrastructure.application.runs import RunService
from infrastructure.application.tenancy import holds, require_holder
from infrastructure.storage.store import LedgerStore
from projections.reflective_log import ReflectiveLog


def run_id_of(started: RunStarted, tenant: str) -> str:
    """The emitter's job id, else one derived from seed, tenant and input (stable on re-send)."""
    if started.job_id is not None:
        return started.job_id
    return "run-" + derive_id(started.seed_text, "run", f"{tenant}:{started.input}", 0)[:32]


class RunUploads:
    def __init__(self, store: LedgerStore, runs: RunService, jobs: JobService) -> None:
        self.store = store
        self.runs = runs
        self.jobs = jobs

    def open(self, started: RunStarted, tenant: str) -> tuple[RunDraft, bool]:
        """Open a run; the same start re-sent returns the open run. True when newly opened."""
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
        pairs = [(event_id, event.model_dump(mode="json")) for event_id, event in batch]

        def attempt() -> BatchOutcome:
            draft = self.get(run_id, tenant)
            declared = draft.started.get("snapshot_ids") or {}
            self.runs.privacy.refuse_clear_private_values(declared, [event for _, event in batch])
            outcome = draft.append(pairs)
            limits.check_events(f"run {run_id}", draft.events)
            self.store.save(draft)
            return outcome

        return self.store.racing(attempt, f"events for run {run_id}")

    def complete(self, run_id: str, tenant: str, final_output: Any) -> tuple[ReflectiveLog, int]:
        """Record the run as a sealed job; completing it again with the same output is a no-op.

        Returns the job's log and how many events the run sent.
        """
        draft = self.get(run_id, tenant)
        sent = len(draft.events)
        if not draft.completed:
            started = RunStarted.model_validate({**draft.started, "job_id": run_id})
            events = _held_events(run_id, draft.events)
            completed = RunCompleted(final_output=final_output)

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
                log = self.runs.record(started, events, completed, tenant, completed_draft)
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

    def _existing(self, run_id: str, tenant: str) -> RunDraft | None:
        stream = RunDraft.id_in(tenant, run_id)
        try:
            draft = self.store.repository.get_one(RunDraft, stream, f"run {run_id}")
        except NotFoundError:
            return None
        # A default-tenant name may hold another tenant's run opened before ids were scoped.
        return draft if holds(tenant, draft.tenant) else None


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
    event: RunEvent = INGEST_LINE.validate_python(content)
    assert isinstance(event, EMITTED_TYPES)
    return event
