"""Recording a run produced elsewhere (an outside emitter's start, events and completion) as one
sealed job. `run_recorder` (Python API), `run_imports` (``mace ingest``) and `run_uploads` (HTTP)
come in through here."""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from typing import Any

from domain.aggregate import MaceAggregate
from domain.capture import policy_bundles_named, record_captured
from domain.errors import InvalidInput
from domain.events import (
    RunCompleted,
    RunEvent,
    RunStarted,
    SemRead,
    SemWrite,
)
from domain.job import DEFAULT_TENANT, CaptureMode, Job, validate_tenant
from domain.snapshot import SnapshotKind
from domain.stage0.config import BrainStateConfig, GovernanceConfig, SelfRepConfig
from domain.tool_boundary import check_tool_boundary, tool_steps
from infrastructure.application.jobs import JobService
from infrastructure.application.limits import InputLimits
from infrastructure.application.policy import PolicyService
from infrastructure.application.privacy_rules import PrivacyRules
from infrastructure.application.snapshots import SnapshotService
from projections.reflective_log import RanAsRecorded, ReflectiveLog, recorded_events
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
        check_tool_boundary(tool_steps(events))
        closing = self._closing(started, completed, tenant, policy_bundles_named(events))

        def attempt() -> ReflectiveLog:
            job_id = self.jobs.id_for(started.job_id, started.seed_text, started.input, tenant)
            job = self.opened_job(started, job_id, tenant, derived=started.job_id is None)
            self.check_sem_claims(job, list(enumerate(events)))
            ran = RanAsRecorded(record_captured(job, events))
            return closing.commit(job, alongside(job_id), derived=started.job_id is None, ran=ran)

        return self.jobs.store.racing(attempt, "record run")

    def opened_job(self, started: RunStarted, job_id: str, tenant: str, *, derived: bool) -> Job:
        """The job a run records itself as, started, nothing recorded on it yet; ``derived``:
        ``job_id`` is seed 004 D3's, the emitter named none."""
        capture = CaptureMode(started.capture_mode)
        return Job.start(
            job_id,
            started.seed_text,
            started.input,
            started.declared_ids,
            capture,
            tenant,
            job_id_derived=derived,
        )

    def close(
        self,
        started: RunStarted,
        job: Job,
        completed: RunCompleted,
        alongside: Sequence[MaceAggregate],
        held_macs: Sequence[bytes],
    ) -> ReflectiveLog:
        """Close and seal a run's job whose stream already holds every event of the run, read
        (verified) with the MACs of its records, ``held_macs``: only the completion and the seal
        are written, with ``alongside``, in one transaction. Each fact is decoded once, for
        the policy bundles it names, the verdict's folds and the log."""
        ran = RanAsRecorded([event for _, event in recorded_events(job)])
        closing = self._closing(started, completed, job.tenant, policy_bundles_named(ran.events))
        return closing.commit(job, alongside, held_macs=held_macs, ran=ran)

    def _closing(
        self, started: RunStarted, completed: RunCompleted, tenant: str, named: Set[str]
    ) -> _Closing:
        """What closing a run's job needs from the ledger, read once whatever the attempts:
        its final output held to the limits, the snapshots it declares (content-addressed, they
        cannot change between tries) and the policy bundles its events name that the tenant
        holds."""
        run = "run" if started.job_id is None else f"run {started.job_id}"
        self.limits.check_final_output(run, completed.final_output)
        held = self.snapshots.held(started.declared_ids.values())
        found = {kind: held.get(sid) for kind, sid in started.declared_ids.items()}
        bundles = named & self.policy.held_bundles(tenant).keys() if named else set()
        configs = (
            self.snapshots.config(SnapshotKind.SELFREP, found.get(SnapshotKind.SELFREP.value)),
            self.snapshots.config(
                SnapshotKind.BRAINSTATE, found.get(SnapshotKind.BRAINSTATE.value)
            ),
            self.snapshots.config(
                SnapshotKind.GOVERNANCE, found.get(SnapshotKind.GOVERNANCE.value)
            ),
        )
        return _Closing(self.jobs, completed.final_output, configs, frozenset(held), bundles)

    def check_sem_claims(self, job: Job, events: Sequence[tuple[int, RunEvent]]) -> None:
        """`RefusedSemClaim` at the ``position`` of the first of a run's ``(position, event)``
        pairs to be recorded on ``job`` whose SEM claim the tenant's SEM log contradicts
        (`record`)."""
        for position, event in events:
            if not isinstance(event, SemRead | SemWrite):
                continue
            problem = sem_claim_problem(self.jobs.sem, job.tenant, job.job_id, event)
            if problem is not None:
                message = f"{event.EVENT_TYPE} (iteration {event.iteration}) {problem}"
                raise RefusedSemClaim(position, message)


@dataclass(frozen=True, slots=True)
class _Closing:
    """A run's job's closing, as `RunService._closing` read it: commit it (`JobService.commit`)."""

    jobs: JobService
    final_output: Any
    configs: tuple[SelfRepConfig | None, BrainStateConfig | None, GovernanceConfig | None]
    stored: frozenset[str]
    bundles: Set[str]

    def commit(
        self,
        job: Job,
        alongside: Sequence[MaceAggregate],
        *,
        derived: bool = False,
        held_macs: Sequence[bytes] = (),
        ran: RanAsRecorded | None = None,
    ) -> ReflectiveLog:
        return self.jobs.commit(
            job,
            self.final_output,
            self.configs,
            alongside,
            set(self.stored),
            derived=derived,
            held_bundles=self.bundles,
            held_macs=held_macs,
            ran=ran,
        )
