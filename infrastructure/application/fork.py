"""Fork use case (issue 31 point 4): keep a recorded job's iterations before ITERATION as
recorded, re-run the rest under changes (other snapshots, another input for ITERATION), record
the result as a new job with its lineage, and say how it differs from the original.

`ForkService.fork` is the one way in for ``mace fork``, ``POST /v1/jobs/{id}/fork`` and Python
callers. In order, nothing written until the last two steps:

1. Who acts may run a what-if (audit-mode replay roles), no council approval: a fork claims
   nothing authoritative.
2. The original is replayed under what it declared and must reproduce (`ReplayService.
   replay_declared`): its kept iterations are then proven to be what the runtime gives, and the
   fork serves them from its recording, byte for byte, without re-running them.
3. Only what can be decided again is forked: a job of Stage-0 iterations (`ITERATION_EVENTS`).
   An outside run's tools, models, gates and retrievals are the run's word (FORK_NOT_REDECIDABLE);
   so is memory: kept iterations that met SEM (the fork's replay meets SEM where the fork is
   recorded, not where the original was), and re-run iterations that would write SEM (a
   counterfactual never writes the tenant's memory). Re-run iterations read the tenant's SEM as
   it stands, as a live job does, and the commit checks those reads still stand.
4. The fork is committed as a normal job (signed, sealed, witnessed): same seed and capture mode
   as the original, the changed snapshots declared, its lineage in its start (`domain.fork`).
   Its id is derived from what it forks: the same fork again is a CONFLICT naming it.
5. A `CounterfactualRecord` of kind ``fork`` records who forked what and the differences.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from domain.errors import ConflictError, ErrorCode, InvalidInput, MaceError
from domain.events import (
    ITERATION_EVENTS,
    InputReceived,
    JobCompleted,
    RunEvent,
    SemRead,
    SemWrite,
    decode_recorded,
)
from domain.fork import (
    ForkLineage,
    NotForkable,
    check_iteration,
    fork_changes,
    fork_job_id,
    lineage_of,
)
from domain.governance import Actor
from domain.job import DEFAULT_TENANT, CaptureMode, Job, validate_tenant
from domain.replay_access import check_audit_roles
from domain.sem import SemEntry
from domain.whatif import WhatIfChanges
from domain.whatif_record import FORK_KIND, FORK_KIND_VERSION
from infrastructure.application.jobs import JobService
from infrastructure.application.replays import ReplayService
from infrastructure.application.sem import SemService
from infrastructure.application.snapshots import SnapshotService
from infrastructure.application.whatif import WhatIfService
from infrastructure.storage.store import LedgerStore
from projections.fork import fork_report
from projections.reflective_log import RanAsRecorded
from projections.stage0_runtime import Stage0Run, Stage0Snapshots, run_iteration


@dataclass(frozen=True)
class ForkResult:
    record_id: str
    fork_job_id: str
    report: dict[str, Any]

    def answer(self) -> dict[str, Any]:
        """What ``mace fork --json`` prints and ``POST /v1/jobs/{id}/fork`` answers."""
        return {"record_id": self.record_id, **self.report}


@dataclass(frozen=True)
class _Original:
    job: Job
    events: list[RunEvent]
    final_answer: Any


class ForkService:
    def __init__(
        self,
        store: LedgerStore,
        jobs: JobService,
        snapshots: SnapshotService,
        sem: SemService,
        replays: ReplayService,
        whatif: WhatIfService,
    ) -> None:
        self.store = store
        self.jobs = jobs
        self.snapshots = snapshots
        self.sem = sem
        self.replays = replays
        self.whatif = whatif

    def fork(
        self,
        job_id: str,
        at: int,
        actor: Actor,
        *,
        changes: WhatIfChanges | None = None,
        text: str | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> ForkResult:
        """The tenant's job forked at iteration ``at`` (see the module's steps)."""
        validate_tenant(tenant)
        check_iteration(at)
        check_audit_roles(actor, "a fork")
        changed = fork_changes(changes)
        if text is not None:
            Job.check_start(None, "fork", text, {})  # an input any job could start with
        original = self._reproduced(job_id, tenant)
        kept = _kept(original, at)
        fork_id = fork_job_id(tenant, original.job.job_id, at, changed, text)
        if self.jobs.exists(fork_id, tenant=tenant):
            msg = (
                f"job {job_id} was forked from iteration {at} under these changes already, as job"
                f" {fork_id}: a fork is recorded once (replay it, or fork with other changes)"
            )
            raise ConflictError(msg)
        declared = {**original.job.snapshot_ids}
        declared.update({kind.value: sid for kind, sid in changed.snapshots.items()})
        ids, snapshots, _ = self.snapshots.stage0(declared)
        lineage = ForkLineage(
            job_id=original.job.job_id,
            iteration=at,
            prefix_snapshot_ids=_kept_under(original.job, at),
            changes=changed.as_json(),
            input=text,
        )

        def attempt() -> tuple[list[RunEvent], Any]:
            events, run, reads = self._rerun(original, kept, at, fork_id, snapshots, text)
            job_input = text if at == 0 and text is not None else original.job.job_input
            job = Job.start(
                fork_id,
                original.job.job_seed,
                job_input,
                ids,
                CaptureMode(original.job.capture_mode),
                tenant,
                forked_from=lineage.as_json(),
            )
            # The kept iterations' payloads as the original's records hold them: the same
            # canonical bytes, under the same seed-derived ids and sequence indices.
            for fact in original.job.facts[:kept]:
                job.record(fact.event_type, fact.payload)
            for event in events[kept:]:
                job.record(event.EVENT_TYPE, event.written_payload())
            configs = (snapshots.selfrep, snapshots.brainstate, snapshots.governance)
            assert run.brainstate_after is not None  # every run of an iteration folds it
            self.jobs.commit(
                job,
                run.final_output,
                configs,
                stored=set(ids.values()),
                unmoved=reads,
                ran=RanAsRecorded(events, run.brainstate_after),
            )
            return events, run.final_output

        events, answer = self.store.racing(attempt, "fork")
        report = fork_report(
            lineage,
            fork_id,
            (original.events, original.final_answer),
            (events, answer),
            kept,
            actor,
            tenant,
        )
        parameters = {
            "job_id": original.job.job_id,
            "iteration": at,
            "changes": changed.as_json(),
            "input": text,
            "fork_job_id": fork_id,
        }
        record = self.whatif.record(FORK_KIND, FORK_KIND_VERSION, parameters, report, actor, tenant)
        return ForkResult(record.record_id, fork_id, report)

    def _reproduced(self, job_id: str, tenant: str) -> _Original:
        """The tenant's job, verified and reproduced by an audit replay under what it declared;
        MaceError with the replay's code when it is not (a fork would keep what the runtime
        does not give)."""
        job, baseline = self.replays.replay_declared(job_id, tenant=tenant)
        if baseline.error_code is not None or job is None:
            code = baseline.error_code or ErrorCode.INTEGRITY_FAILURE
            message = (
                f"job {job_id} does not verify and reproduce under its declared snapshots"
                f" ({baseline.error_message}): a fork keeps its iterations as recorded, so it"
                " is not forked"
            )
            raise MaceError(code, message)
        facts = [f for f in job.facts if f.event_type != JobCompleted.EVENT_TYPE]
        events = [decode_recorded(f.event_type, f.payload) for f in facts]
        completion = decode_recorded(JobCompleted.EVENT_TYPE, job.facts[-1].payload)
        assert isinstance(completion, JobCompleted)  # the replay found the job complete
        return _Original(job, events, completion.final_output)

    def _rerun(
        self,
        original: _Original,
        kept: int,
        at: int,
        fork_id: str,
        snapshots: Stage0Snapshots,
        text: str | None,
    ) -> tuple[list[RunEvent], Stage0Run, dict[UUID, int]]:
        """The original's first ``kept`` events, then each iteration from ``at`` re-run after
        them (``text``: iteration ``at``'s input); the last run, and the SEM versions read."""
        tenant = original.job.tenant
        memory = self.sem.of(tenant)
        mode = CaptureMode(original.job.capture_mode)
        events = list(original.events[:kept])
        reads: dict[UUID, int] = {}
        run: Stage0Run | None = None
        for recorded in _percepts(original.events[kept:]):
            percept = recorded
            if recorded.iteration == at and text is not None:
                percept = InputReceived(iteration=at, text=text, user=recorded.user)
            run = run_iteration(
                fork_id, original.job.job_seed, percept, events, snapshots, memory, mode
            )
            written = next((e for e in run.events if isinstance(e, SemWrite)), None)
            if written is not None:
                msg = (
                    f"iteration {percept.iteration} re-run writes SEM key {written.key}: a fork"
                    " never writes the tenant's memory, so it is not forked"
                )
                raise NotForkable(msg)
            for key, version in run.sem_reads.items():
                reads.setdefault(SemEntry.id_in(tenant, key), version)
            events.extend(run.events)
        assert run is not None  # `_kept` found iteration ``at`` recorded
        return events, run, reads


def _kept(original: _Original, at: int) -> int:
    """How many of the original's first events the fork keeps: those of the iterations before
    ``at``. InvalidInput when the job did not record iteration ``at``; NotForkable when it holds
    what a fork cannot decide again."""
    job_id = original.job.job_id
    iterations = sorted({e.iteration for e in original.events if isinstance(e, ITERATION_EVENTS)})
    if at not in iterations:
        recorded = f"0 to {iterations[-1]}" if iterations else "none"
        raise InvalidInput(f"--at {at}: job {job_id} recorded iterations {recorded}")
    for index, event in enumerate(original.events):
        if not isinstance(event, ITERATION_EVENTS):
            msg = (
                f"job {job_id} holds event {index} {event.EVENT_TYPE}, an outside run's fact a"
                " fork cannot decide again: a fork re-runs Stage-0 iterations only (mace replay"
                " --with says what of an outside run can be re-decided)"
            )
            raise NotForkable(msg)
    # The replay proved the iterations run 0, 1, 2... in stream order.
    kept = next(n for n, e in enumerate(original.events) if _iteration_of(e) >= at)
    met = next((e for e in original.events[:kept] if isinstance(e, SemRead | SemWrite)), None)
    if met is not None:
        msg = (
            f"job {job_id}'s iteration {_iteration_of(met)} met SEM key {met.key}: a fork keeps"
            " iterations as recorded, but its replay meets SEM where the fork is recorded, not"
            " where the original was; fork from that iteration or before"
        )
        raise NotForkable(msg)
    return kept


def _kept_under(job: Job, at: int) -> dict[str, str]:
    """The snapshots the iterations before ``at`` were decided under: those ``job`` declared, or,
    for a fork kept short of where it re-ran, those its own kept iterations ran under. A fork's
    kept iterations that span both are not one set: NotForkable (fork the original instead)."""
    lineage = lineage_of(job.provenance)
    if lineage is None or lineage.iteration == 0:
        return dict(job.snapshot_ids)
    if at <= lineage.iteration:
        return dict(lineage.prefix_snapshot_ids)
    if dict(lineage.prefix_snapshot_ids) == job.snapshot_ids:
        return dict(job.snapshot_ids)
    msg = (
        f"job {job.job_id} is a fork of job {lineage.job_id} from iteration {lineage.iteration}:"
        f" its iterations before {at} ran under two sets of snapshots; fork it from iteration"
        f" {lineage.iteration} or before, or fork job {lineage.job_id}"
    )
    raise NotForkable(msg)


def _iteration_of(event: RunEvent) -> int:
    assert isinstance(event, ITERATION_EVENTS)
    return event.iteration


def _percepts(events: Sequence[RunEvent]) -> list[InputReceived]:
    return [e for e in events if isinstance(e, InputReceived)]
