"""Replay use cases: run seed 000 section 6 over the ledger and record every attempt.

A replay is recorded in two places: the job's governance record gets the signed REPLAY_REQUEST
before anything else happens (so a refused or crashed attempt is still on record) and the
REPLAY_RESULT at the end; the attempt's own replay record gets every verification step and the
report. The result, the record and any halts the replay sets are stored in one transaction. A
job's first request opens its governance record (`Governance.OpenedByReplay`): every replay
stores three events.
Reached as ``ledger.replays``. `ReplayService.replay_unrecorded` runs the same replay, under the
same access rules, where nothing can be recorded (a bundle's in-memory ledger).

Concurrent replays of one job race for the next version of its governance record. Neither
append gives up on a lost race within the store's retry budget (`GovernanceService.store_racing`):
the request is decided again on the record as it now stands (attempt number, approvals) and
appended, or it raises before anything is written; the result is for the attempt its request got,
whatever was appended since, so it is built again on the new record and appended. What can still
leave a request without a result is the process failing between the two (killed, the store lost
or refusing the write, other writers outlasting the retry budget, an unexpected error): the
replay holds a lease (`replay_leases`) from before its request is stored
until its result is, so readers tell such an abandoned request from a running one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, TypeVar
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from domain.aggregate import MaceAggregate
from domain.as_of import MemoryAsOf
from domain.canonical import digest
from domain.errors import ErrorCode, IntegrityFailure, MaceError, NotFoundError, OpenJob
from domain.governance import (
    Actor,
    Governance,
    HaltCause,
    Motion,
    governance_scope_of_job,
    governance_scope_of_snapshot,
    halt_scopes,
    replay_requested,
)
from domain.job import Job
from domain.memories import Memory
from domain.naming import DEFAULT_TENANT
from domain.replay_access import ReplayMode, check_mocks_allowed, replay_refusal
from domain.replay_record import ReplayRecord, replay_record_name
from domain.sem import SemEntry
from domain.snapshot import Snapshot
from domain.stage0.agents import AgentReply
from domain.whatif import WhatIfChanges
from infrastructure.application.governance import GovernanceService, halt_reason_in
from infrastructure.application.jobs import JobService
from infrastructure.application.memories import MemoryService
from infrastructure.application.policy import PolicyService
from infrastructure.application.snapshots import SnapshotService, content_checked
from infrastructure.storage.checkpoints.head_check import ShortOfCheckpoint
from infrastructure.storage.ops_clock import recorded_at, stopwatch
from infrastructure.storage.records.integrity import verify_stream
from infrastructure.storage.store import LedgerStore
from projections.replay import Absent, ReplayOutcome, ReplayRequest, replay_job
from projections.replay_report import render_markdown, replay_report

T = TypeVar("T")

#: Snapshots decoded and content-checked that a process keeps (`ReplayService.checked_snapshot`).
SNAPSHOTS_KEPT: Final = 1024


@dataclass(frozen=True)
class ReplayResult:
    attempt: int
    outcome: ReplayOutcome
    report: dict[str, Any]
    markdown: str


class SharedReads:
    """What the replays of one batch (an audit's, in one worker) read alike, read and judged once
    for all of them: each declared snapshot (present or not, then verified and content-checked)
    and each halt record over one.

    A snapshot's stream is written once, by its content address, and never appended to: what one
    read of it shows (absent, deleted below a checkpoint, edited, intact) holds for every job
    naming it, and each of them gets that verdict. A halt record can grow, but an audit judges the
    log as it stands when it begins: its replays read each halt record once, the first time one
    is asked for, and a halt appended while the audit runs is left to the next one. A replay
    alone gets a `SharedReads` of its own: it reads each stream once, as before.
    """

    def __init__(self) -> None:
        self.absent: dict[str, Absent | MaceError | None] = {}
        self.snapshots: dict[str, Snapshot | MaceError] = {}
        self.halts: dict[str, Governance | MaceError | None] = {}


def _once(judged: dict[str, T | MaceError], key: str, judge: Callable[[], T]) -> T:
    """``judge()`` the first time ``key`` is asked for, then what it answered, or raised (a
    refusal of the ledger's, not a failure of the store to answer: that is asked again)."""
    if key not in judged:
        try:
            judged[key] = judge()
        except MaceError as refused:
            judged[key] = refused
            raise
    answer = judged[key]
    if isinstance(answer, MaceError):
        raise answer
    return answer


class LedgerReplaySource:
    """`ReplaySource` over the ledger: every read verified, the job (the tenant's) read once.

    The streams a replay reads after the job (its governance record, its declared snapshots,
    the halt records over them) are read together, in one query, when the first of them is
    asked for (the record, for the request): on PostgreSQL the round trips were most of a
    replay's time. Each is verified when it is used, as before; the snapshots and halt records
    once for all the replays that share ``shared`` (`SharedReads`).
    """

    def __init__(
        self,
        replays: ReplayService,
        job: Job | None,
        tenant: str,
        scope: str | None = None,
        *,
        carries_tenant_state: bool = True,
        shared: SharedReads | None = None,
    ) -> None:
        """``scope``: the job's governance record, read with the others (`governance_record`).
        ``carries_tenant_state``: the store holds the tenant's memory log and policy books (a
        bundle's records do not). ``shared``: what other replays read before this one."""
        self._replays = replays
        self._job = job
        self._tenant = tenant
        self._scope = scope
        self.carries_tenant_state = carries_tenant_state
        self._shared = SharedReads() if shared is None else shared
        self._read: dict[UUID, Sequence[StoredEvent]] = {}

    def load_job(self, job_id: str) -> Job:
        if self._job is not None:
            return self._job
        return self._replays.jobs.get(job_id, tenant=self._tenant)

    def snapshot_absent(self, snapshot_id: str) -> Absent | None:
        return _once(self._shared.absent, snapshot_id, lambda: self._absent(snapshot_id))

    def _absent(self, snapshot_id: str) -> Absent | None:
        stream = Snapshot.id_for(snapshot_id)
        try:
            return None if self._records(stream) else Absent()
        except ShortOfCheckpoint as short:
            if short.stream != str(stream) or short.held:
                raise  # another stream's, or a snapshot cut short: its bytes were altered
            proof = (
                f"checkpoint {short.checkpoint} records its stream {stream} at version"
                f" {short.head}; the store holds none of it"
            )
            return Absent(deleted=proof)

    def load_snapshot(self, snapshot_id: str) -> Snapshot:
        return _once(self._shared.snapshots, snapshot_id, lambda: self._snapshot(snapshot_id))

    def _snapshot(self, snapshot_id: str) -> Snapshot:
        stream = Snapshot.id_for(snapshot_id)
        snapshot = self._replays.checked_snapshot(stream, self._records(stream))
        if snapshot is None:
            raise NotFoundError(f"no snapshot {snapshot_id}")
        return snapshot

    def halt_reason(self, tenant: str, snapshot_id: str) -> str | None:
        own, store_wide = (
            _once(self._shared.halts, scope, partial(self._governance, scope))
            for scope in halt_scopes(snapshot_id, tenant)
        )
        return halt_reason_in(snapshot_id, own, store_wide)

    def memories_at(self, tenant: str, position: int) -> list[Memory] | None:
        return self._replays.memories.live_at(tenant, position)

    def policy_bundles(self, tenant: str) -> dict[str, str]:
        return self._replays.policy.held_bundles(tenant)

    def sem_events(self, tenant: str, key: str) -> list[SemEntry.Event]:
        return self._replays.jobs.sem.sem_events(tenant, key)

    def sem_positions(self, tenant: str, key: str) -> dict[int, int]:
        return self._replays.jobs.sem.sem_positions(tenant, key)

    def job_position(self, job: Job) -> int:
        positions = self._replays.store.stream_positions([job.id])[job.id]
        if 1 not in positions:
            # The job was read and verified whole just before: its first record is gone since.
            raise IntegrityFailure(job.id, 1, "the job's first record is no longer stored")
        return positions[1]

    def governance_record(self) -> Governance | None:
        """The job's governance record (None: none yet), verified: the first time as read with
        the replay's other streams, then read again at each call (a save on it lost a race)."""
        assert self._scope is not None
        record = self._governance(self._scope)
        self._read.pop(Governance.id_for(self._scope))
        return record

    def _governance(self, scope: str) -> Governance | None:
        stream = Governance.id_for(scope)
        return self._replays.store.repository.aggregate(Governance, stream, self._records(stream))

    def _records(self, stream: UUID) -> Sequence[StoredEvent]:
        if stream not in self._read:
            streams = dict.fromkeys([stream, *self._ahead()])
            try:
                self._read = self._replays.store.repository.read(list(streams))
            except IntegrityFailure:
                # One of them falls short of its checkpointed head: the one asked for is read
                # alone, so that a failure is met where its stream is used (a snapshot's or a
                # halt record's in the replay, which records it; the governance record's before
                # the request).
                self._read = self._replays.store.repository.read([stream])
        return self._read[stream]

    def _ahead(self) -> list[UUID]:
        """The job's governance record, the streams of its declared snapshots, then of the halt
        records over them: those not judged already (`SharedReads`)."""
        own = [] if self._scope is None else [Governance.id_for(self._scope)]
        if self._job is None:
            return own
        shared = self._shared
        snapshot_ids = list(self._job.snapshot_ids.values())
        halts = [
            Governance.id_for(scope)
            for snapshot_id in snapshot_ids
            for scope in halt_scopes(snapshot_id, self._job.tenant)
            if scope not in shared.halts
        ]
        unread = [Snapshot.id_for(sid) for sid in snapshot_ids if sid not in shared.snapshots]
        return [*own, *unread, *halts]


@dataclass
class ReplayAttempt:
    """A replay attempt whose request is recorded (`ReplayService.attempt`): its number, what
    its replay reads and what governance allows it; its block sets ``outcome``, and ``result``
    holds what was recorded once the block ends."""

    number: int
    source: LedgerReplaySource
    force_approved: bool
    production_approved: bool
    elapsed: Callable[[], float]
    outcome: ReplayOutcome | None = None
    result: ReplayResult | None = None


def access_refused(
    job_id: str, mode: ReplayMode, actor: Actor, production_approved: bool
) -> ReplayOutcome | None:
    """None when the access rules let ``actor`` replay the job in ``mode``; else why not, as an
    outcome stopped before the replay ran."""
    refusal = replay_refusal(mode, actor, production_approved)
    if refusal is None:
        return None
    outcome = ReplayOutcome.stopped(job_id, mode, "access", ErrorCode.ACCESS_DENIED, refusal)
    outcome.non_authoritative.append("the replay was refused before it ran")
    return outcome


class ReplayService:
    def __init__(
        self,
        store: LedgerStore,
        jobs: JobService,
        snapshots: SnapshotService,
        governance: GovernanceService,
        policy: PolicyService,
        memories: MemoryService,
    ) -> None:
        self.store = store
        self.jobs = jobs
        self.snapshots = snapshots
        self.governance = governance
        self.policy = policy
        self.memories = memories
        # Snapshots decoded and content-checked, by their stream and their records' MACs.
        self._checked: dict[tuple[UUID, tuple[bytes, ...]], Snapshot] = {}

    def checked_snapshot(self, stream: UUID, records: Sequence[StoredEvent]) -> Snapshot | None:
        """The snapshot ``records`` (its whole stream, as read) hold, verified (versions, MACs)
        and content-checked (its id follows from its payload); None when there are none.

        Every read is verified; what follows from verified bytes alone is worked out once a
        process: equal MACs under the ledger's keys are equal records, so a snapshot decoded
        and content-checked once is that snapshot again (it was most of a replay's reading of
        its snapshots). Bytes edited since fail their MAC check first, and are never looked up.
        """
        verified = verify_stream(self.store.keyring, stream, records)
        if not verified:
            return None
        key = (stream, tuple(record.mac for record in verified))
        snapshot = self._checked.get(key)
        if snapshot is None:
            decoded = self.store.repository.folded(Snapshot, stream, verified)
            assert decoded is not None  # records there were
            if len(self._checked) >= SNAPSHOTS_KEPT:
                # A long-lived service meets ever more snapshots: the oldest kept one goes.
                del self._checked[next(iter(self._checked))]
            snapshot = self._checked[key] = content_checked(decoded)
        return snapshot

    def run(
        self,
        job_id: str,
        mode: ReplayMode,
        actor: Actor,
        *,
        tenant: str = DEFAULT_TENANT,
        force_continue: bool = False,
        mocks: Mapping[str, AgentReply] | None = None,
        elapsed: Callable[[], float] | None = None,
    ) -> ReplayResult:
        """Seed 000 section 6 for the tenant's job, recorded: REPLAY_REQUEST, steps, report,
        result."""
        check_mocks_allowed(mode, bool(mocks))
        with self.attempt(
            job_id, mode, actor, tenant=tenant, force_continue=force_continue, elapsed=elapsed
        ) as attempt:
            request = ReplayRequest(
                job_id, mode, force_continue, attempt.force_approved, mocks or {}, attempt.elapsed
            )
            attempt.outcome = self._decided(
                attempt.source, request, actor, attempt.production_approved
            )
        assert attempt.result is not None
        return attempt.result

    @contextmanager
    def attempt(
        self,
        job_id: str,
        mode: ReplayMode,
        actor: Actor,
        *,
        tenant: str = DEFAULT_TENANT,
        force_continue: bool = False,
        elapsed: Callable[[], float] | None = None,
    ) -> Iterator[ReplayAttempt]:
        """One recorded attempt at replaying the tenant's job, however it is replayed (`run`, the
        re-execution harness): the signed REPLAY_REQUEST is stored before the block runs, and the
        block's ``attempt.outcome`` after it, as the REPLAY_RESULT, the attempt's replay record
        and report (``attempt.result``), and any halts. A block that raises leaves the request
        without a result, as a process that dies does (its lease tells it from a running one)."""
        name = self.jobs.owned_name(job_id, tenant)
        scope = governance_scope_of_job(name)
        job = self._job_if_intact(name)
        watch = elapsed or stopwatch()

        source = LedgerReplaySource(self, job, tenant, scope)
        with self.governance.leases.hold() as lease:
            now = recorded_at()

            def requested() -> tuple[Governance, Sequence[Governance]]:
                # The first build takes the record from the read of every stream the replay
                # reads; one that lost a race, from a fresh read.
                record = replay_requested(
                    source.governance_record(),
                    scope,
                    mode.value,
                    force_continue,
                    actor,
                    now,
                    lease,
                )
                return record, [record]

            # Access and force-continue are decided on the very record the request was appended to.
            record = self.governance.store_racing(requested, f"replay request for {job_id}")
            attempt = ReplayAttempt(
                record.replay_attempts,
                source,
                record.force_continue_allowed(),
                record.approved(Motion.PRODUCTION_REPLAY),
                watch,
            )
            yield attempt
            outcome = attempt.outcome
            if outcome is None:
                msg = f"replay attempt {attempt.number} of {job_id} ended with no outcome"
                raise RuntimeError(msg)
            report = replay_report(outcome, actor, attempt.number, force_continue, tenant)
            markdown = render_markdown(report)
            seconds = watch()
            # The result goes onto the record as this replay saved it; if the save loses a race
            # (another writer appended to it), onto the record read afresh.
            as_saved: list[Governance] = [record]
            self.governance.store_racing(
                lambda: (
                    None,
                    self._replay_writes(
                        scope,
                        tenant,
                        attempt.number,
                        outcome,
                        actor,
                        report,
                        markdown,
                        seconds,
                        as_saved.pop() if as_saved else None,
                    ),
                ),
                f"replay result for {job_id}",
            )
        attempt.result = ReplayResult(attempt.number, outcome, report, markdown)

    def _job_if_intact(self, name: str) -> Job | None:
        """The job stored under ``name``, refusing an open one up front; None when it fails
        verification (the replay records that)."""
        try:
            job = self.jobs.load_named(name)[0]
        except IntegrityFailure:
            return None
        if not job.sealed:
            msg = f"job {job.job_id} is open: only completed, sealed jobs can be replayed"
            raise OpenJob(msg)
        return job

    def replay_unrecorded(
        self,
        job_id: str,
        mode: ReplayMode,
        actor: Actor,
        *,
        tenant: str = DEFAULT_TENANT,
        force_continue: bool = False,
        run_on: bool = False,
        mocks: Mapping[str, AgentReply] | None = None,
        elapsed: Callable[[], float] | None = None,
        carries_tenant_state: bool = True,
    ) -> ReplayOutcome:
        """Seed 000 section 6 for the tenant's job as `run` does it, nothing recorded: access and
        force-continue decided on the job's governance record as it stands.

        ``run_on``: carry on past every divergence, as an approved force-continue does, for a
        caller that judges the divergences itself (a redacted bundle sets aside what redaction
        hid). ``carries_tenant_state``: False when the store holds only a job's own records (a
        bundle's): retrievals from the tenant's memories and gates under its policy bundles are
        then taken as recorded, never said to be missing or to differ.
        """
        name = self.jobs.owned_name(job_id, tenant)
        scope = governance_scope_of_job(name)
        check_mocks_allowed(mode, bool(mocks))
        job = self._job_if_intact(name)
        record = self.governance.record(scope)
        production_approved = record is not None and record.approved(Motion.PRODUCTION_REPLAY)
        force_approved = record is not None and record.force_continue_allowed()
        request = ReplayRequest(
            job_id,
            mode,
            run_on or force_continue,
            run_on or force_approved,
            mocks or {},
            elapsed or stopwatch(),
        )
        source = LedgerReplaySource(self, job, tenant, carries_tenant_state=carries_tenant_state)
        return self._decided(source, request, actor, production_approved)

    def replay_verified(self, job: Job, shared: SharedReads) -> ReplayOutcome:
        """An audit-mode replay of ``job``, already read and verified whole by the caller (an
        audit's scan), nothing recorded: the same `replay_job` over the same reads of its
        snapshots, halts and SEM history that `run` makes, those the audit's other replays
        made already (``shared``) not made again. The caller checked who acts."""
        request = ReplayRequest(job.job_id, ReplayMode.AUDIT, elapsed=stopwatch())
        source = LedgerReplaySource(self, job, job.tenant, shared=shared)
        return self._run_replay(source, request)

    def replay_changed(
        self,
        job_id: str,
        changes: WhatIfChanges,
        *,
        tenant: str = DEFAULT_TENANT,
        shared: SharedReads | None = None,
    ) -> tuple[ReplayOutcome, ReplayOutcome | None]:
        """A what-if's two audit-mode replays of the tenant's job, nothing recorded: under what
        it declared, then, only when that one stopped on no error (a record not intact, or not
        reproducing itself, says nothing about a change), under ``changes``. Both read each
        stream once (``SharedReads``; a batch's ``shared``: once for all its jobs). The caller
        checked who acts (`check_audit_roles`)."""
        baseline, changed = self._counterfactuals(job_id, tenant, shared, [{"changes": changes}])
        return baseline, changed[0] if changed else None

    def replay_as_of(
        self, job_id: str, points: Sequence[MemoryAsOf], *, tenant: str = DEFAULT_TENANT
    ) -> tuple[ReplayOutcome, list[ReplayOutcome]]:
        """An as-of's audit-mode replays of the tenant's job, nothing recorded: under what it
        declared, then, only when that one stopped on no error, once with memory as of each of
        ``points`` (none when it did). The caller checked who acts."""
        return self._counterfactuals(job_id, tenant, None, [{"as_of": p} for p in points])

    def _counterfactuals(
        self,
        job_id: str,
        tenant: str,
        shared: SharedReads | None,
        variants: Sequence[Mapping[str, Any]],
    ) -> tuple[ReplayOutcome, list[ReplayOutcome]]:
        """The job replayed under what it declared, then, if that reproduced with no error,
        once under each variant of its request (`ReplayRequest` fields), each stream read once."""
        shared = SharedReads() if shared is None else shared
        job, baseline = self.replay_declared(job_id, tenant=tenant, shared=shared)
        if baseline.error_code is not None:
            return baseline, []
        return baseline, [
            self._run_replay(
                LedgerReplaySource(self, job, tenant, shared=shared),
                ReplayRequest(job_id, ReplayMode.AUDIT, elapsed=stopwatch(), **variant),
            )
            for variant in variants
        ]

    def replay_declared(
        self, job_id: str, *, tenant: str = DEFAULT_TENANT, shared: SharedReads | None = None
    ) -> tuple[Job | None, ReplayOutcome]:
        """The tenant's job (None when not intact) and its audit-mode replay under what it
        declared, nothing recorded: whether the record is intact and reproduces itself, before
        a what-if or a fork builds on it. The caller checked who acts."""
        name = self.jobs.owned_name(job_id, tenant)
        job = self._job_if_intact(name)
        shared = SharedReads() if shared is None else shared
        declared = ReplayRequest(job_id, ReplayMode.AUDIT, elapsed=stopwatch())
        source = LedgerReplaySource(self, job, tenant, shared=shared)
        return job, self._run_replay(source, declared)

    def _decided(
        self,
        source: LedgerReplaySource,
        request: ReplayRequest,
        actor: Actor,
        production_approved: bool,
    ) -> ReplayOutcome:
        """The replay, unless the access rules refuse ``actor`` this mode: then why, as an
        outcome stopped before it ran."""
        refused = access_refused(request.job_id, request.mode, actor, production_approved)
        return self._run_replay(source, request) if refused is None else refused

    def _run_replay(self, source: LedgerReplaySource, request: ReplayRequest) -> ReplayOutcome:
        try:
            return replay_job(source, request)
        except MaceError as exc:
            # A stream read mid-replay (SEM history, a governance record) failed verification,
            # or lost the version the job read.
            if exc.code is not ErrorCode.INTEGRITY_FAILURE:
                raise
            return ReplayOutcome.stopped(
                request.job_id, request.mode, "integrity", ErrorCode.INTEGRITY_FAILURE, exc.message
            )

    def _replay_writes(
        self,
        scope: str,
        tenant: str,
        attempt: int,
        outcome: ReplayOutcome,
        actor: Actor,
        report: dict[str, Any],
        markdown: str,
        elapsed: float,
        as_saved: Governance | None,
    ) -> list[MaceAggregate]:
        """The result on the record (``as_saved``: as this replay saved its request; else as it
        stands now, read), the attempt's replay record, any halts.

        Saved onto the record as saved, a conflict (another writer appended to the record, or
        the replay record exists) makes `store_racing` call again, to read and check both."""
        job_name = scope.removeprefix("job:")
        name = replay_record_name(job_name, attempt)
        record = as_saved or self._record_for_result(scope, name, attempt)
        now = recorded_at()
        record.record_replay_result(
            attempt,
            outcome.ok,
            None if outcome.error_code is None else outcome.error_code.value,
            outcome.authoritative,
            len(outcome.divergences),
            digest(report),
            now,
            elapsed_ms=round(elapsed * 1000),
        )
        steps = ReplayRecord.recorded(
            job_name,
            attempt,
            outcome.mode.value,
            [(step.step, step.outcome, step.detail) for step in outcome.steps],
            report,
            markdown,
        )
        halts: list[Governance] = []
        for snapshot_id in outcome.halt_snapshots:
            # The halt is the job's tenant's: another tenant's replay of the snapshot fails its
            # own signature check, and halts there.
            scope_of_halt = governance_scope_of_snapshot(snapshot_id, tenant)
            halt = self.governance.record_or_new(scope_of_halt)
            replay = replay_record_name(outcome.job_id, attempt)
            reason = (
                f"deleted from the ledger, found missing in replay {replay}"
                if outcome.error_code is ErrorCode.MISSING_SNAPSHOT
                else f"signature check failed in replay {replay}"
            )
            halt.halt(snapshot_id, HaltCause.INTEGRITY_FAILURE, reason, actor, now)
            halts.append(halt)
        return [record, steps, *halts]

    def _record_for_result(self, scope: str, name: str, attempt: int) -> Governance:
        """The scope's record read afresh, for the result of attempt ``attempt`` (whose replay
        record is ``name``): neither lost what the request's save stored."""
        replay_stream, record_stream = ReplayRecord.id_for(name), Governance.id_for(scope)
        read = self.store.repository.read([replay_stream, record_stream])
        if read[replay_stream]:
            # Only this attempt's request got its number: the record it came from lost events.
            reason = f"replay record {name} exists before its replay ran"
            raise IntegrityFailure(replay_stream, 1, reason)
        record = self.store.repository.aggregate(Governance, record_stream, read[record_stream])
        if record is None:
            # The request was appended to this record: it is gone, or never stored where read.
            reason = f"the governance record {scope} holding replay request {attempt} is gone"
            raise IntegrityFailure(record_stream, 1, reason)
        return record

    def record(self, job_id: str, attempt: int, *, tenant: str = DEFAULT_TENANT) -> ReplayRecord:
        """One attempt's record of the tenant's job."""
        what = f"replay {replay_record_name(job_id, attempt)}"
        job_name = self.jobs.name(job_id, tenant)
        if job_name is None:
            raise NotFoundError(f"no {what}")
        stream = ReplayRecord.id_for(replay_record_name(job_name, attempt))
        return self.store.repository.get_one(ReplayRecord, stream, what)
