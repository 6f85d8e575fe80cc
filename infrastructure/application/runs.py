"""Recording a run produced elsewhere (an outside emitter's start, events and completion) as one
sealed job. `run_recorder` (Python API), `run_imports` (``mace ingest``) and `run_uploads` (HTTP)
come in through here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from domain.aggregate import MaceAggregate
from domain.capture import apply_capture, policy_bundles_named
from domain.errors import InvalidInput
from domain.events import RunCompleted, RunEvent, RunStarted, SemRead, SemWrite
from domain.job import DEFAULT_TENANT, CaptureMode, Job, validate_tenant
from domain.snapshot import Snapshot, SnapshotKind
from domain.stage0.config import parse_config
from domain.tool_boundary import check_tool_boundary, tool_steps
from infrastructure.application.jobs import JobService
from infrastructure.application.limits import InputLimits
from infrastructure.application.policy import PolicyService
from infrastructure.application.privacy_rules import PrivacyRules
from infrastructure.application.snapshots import SnapshotService
from projections.reflective_log import ReflectiveLog
from projections.replay_sem import sem_claim_problem


class RefusedSemClaim(InvalidInput):
    """A run's SEM read or write that the tenant's SEM log already contradicts; ``position``
    is the event's, in the run's events."""

    def __init__(self, position: int, message: str) -> None:
        super().__init__(message)
        self.position = position


class RunService:
    def __init__(
        self,
        jobs: JobService,
        snapshots: SnapshotService,
        privacy: PrivacyRules,
        policy: PolicyService,
        limits: InputLimits,
    ) -> None:
        self.jobs = jobs
        self.limits = limits
        self.snapshots = snapshots
        self.privacy = privacy
        self.policy = policy

    def record(
        self,
        started: RunStarted,
        events: Sequence[RunEvent],
        completed: RunCompleted,
        tenant: str = DEFAULT_TENANT,
        alongside: Callable[[str], Sequence[MaceAggregate]] = lambda job_id: (),
        *,
        sizes: Sequence[int] | None = None,
    ) -> ReflectiveLog:
        """Record a run produced elsewhere (start, events, completion) as one sealed job.

        `RunTooLarge`, nothing written, for more events or bytes than `limits` lets a run hold.
        `RefusedSemClaim`, nothing written, for a SEM read or write the tenant's SEM log already
        contradicts (`replay_sem.sem_claim_problem`): a version no entry holds, a value that is
        not that version's, a write the ledger did not make for this run (a run recorded from
        outside never writes the tenant's SEM). A miss, or a real version that is not the one
        current where the run is recorded, may have been true when the emitter read: the run is
        kept, and its replay diverges on it (the ledger cannot prove it).

        ``alongside`` makes, afresh for each attempt and given the job's id, aggregates to save
        in the job's own transaction (a run draft marked complete, the run's content index).
        ``sizes``: each event's canonical size, when the caller holds them (a run sent in
        batches keeps them): the limits then count them instead of encoding every event again.
        """
        validate_tenant(tenant)
        run = "run" if started.job_id is None else f"run {started.job_id}"
        if sizes is None:
            self.limits.check_events(run, [event.model_dump(mode="json") for event in events])
        else:
            self.limits.check_added(run, sizes, len(sizes))
        self.limits.check_final_output(run, completed.final_output)
        check_tool_boundary(tool_steps(events))
        capture = CaptureMode(started.capture_mode)
        ids = started.declared_ids
        # The declared snapshots are read once: content-addressed, they cannot change between tries.
        held = self.snapshots.held(ids.values())
        found = {kind: held.get(sid) for kind, sid in ids.items()}
        stored = set(held)
        named = policy_bundles_named(events)
        bundles = named & self.policy.held_bundles(tenant).keys() if named else set()
        configs = (
            _config_if_usable(found.get(SnapshotKind.SELFREP.value), SnapshotKind.SELFREP),
            _config_if_usable(found.get(SnapshotKind.BRAINSTATE.value), SnapshotKind.BRAINSTATE),
            _config_if_usable(found.get(SnapshotKind.GOVERNANCE.value), SnapshotKind.GOVERNANCE),
        )

        def attempt() -> ReflectiveLog:
            job_id = self.jobs.id_for(started.job_id, started.seed_text, started.input, tenant)
            job = Job.start(
                job_id,
                started.seed_text,
                started.input,
                ids,
                capture,
                tenant,
                job_id_derived=started.job_id is None,
            )
            self._refuse_contradicted_sem(job_id, tenant, events)
            for event in events:
                captured = apply_capture(event, capture)
                job.record(captured.EVENT_TYPE, captured.written_payload())
            return self.jobs.commit(
                job,
                completed.final_output,
                configs,
                alongside(job_id),
                set(stored),
                derived=started.job_id is None,
                held_bundles=bundles,
            )

        return self.jobs.store.racing(attempt, "record run")

    def _refuse_contradicted_sem(
        self, job_id: str, tenant: str, events: Sequence[RunEvent]
    ) -> None:
        for position, event in enumerate(events):
            if not isinstance(event, SemRead | SemWrite):
                continue
            problem = sem_claim_problem(self.jobs.sem, tenant, job_id, event)
            if problem is not None:
                message = f"{event.EVENT_TYPE} (iteration {event.iteration}) {problem}"
                raise RefusedSemClaim(position, message)


def _config_if_usable(snapshot: Snapshot | None, kind: SnapshotKind) -> Any:
    """The parsed configuration a stored snapshot of ``kind`` holds, if it is one and usable."""
    if snapshot is None or snapshot.kind != kind.value:
        return None
    try:
        return parse_config(kind, snapshot.payload)
    except ValueError:
        return None
