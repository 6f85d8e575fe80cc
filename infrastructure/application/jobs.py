"""Job use cases: run a Stage-0 job, record one piece by piece, seal, verify and read jobs back.

A completed job is closed, sealed and witnessed in one transaction (`JobService.commit`, shared
with runs recorded from outside), which writes only the job's own streams and what is stored
with it (its memory writes, per key): no store-wide stream or number that every writer races
for. The jobs in the order the store recorded them are the job index, a read
model built from the notification log after commit. Every read verifies the job's stream in
full: versions, MACs, seal and witness.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import IntegrityError, RecordConflictError, StoredEvent

from domain.aggregate import MaceAggregate
from domain.capture import apply_capture, chosen_capture
from domain.determinism import derive_id, iso_text
from domain.errors import ConflictError, ErrorCode, IntegrityFailure, InvalidInput, MaceError
from domain.events import JobCompleted, SemRead, SemWrite, decode_recorded
from domain.evidence_uri import event_uri
from domain.job import (
    DEFAULT_TENANT,
    CaptureMode,
    Job,
    JobSealWitness,
    sequence_problem,
    validate_job_id,
    validate_tenant,
)
from domain.naming import tenant_scoped
from domain.sem import SemEntry
from domain.snapshot import Snapshot
from domain.stage0.config import BrainStateConfig, GovernanceConfig, SelfRepConfig
from domain.stage0.refusals import RefusedValue, refusal_mark
from infrastructure.application.sem import SemService
from infrastructure.application.snapshots import (
    SnapshotService,
    default_declarations,
    default_snapshots,
)
from infrastructure.application.tenancy import StandIn, holds, require_holder
from infrastructure.storage.records.integrity import SealFacts, check_witness, verify_stream
from infrastructure.storage.records.signed_record import VerifiedRecord, mac_digest, record_mac
from infrastructure.storage.store import LedgerStore
from projections.reflective_log import RanAsRecorded, ReflectiveLog, complete_job
from projections.refused_input import recorded_input
from projections.replay_sem import versions_met
from projections.stage0_runtime import Stage0Run, run_stage0


@dataclass(frozen=True)
class JobVerification:
    job_id: str
    events: int
    sealed: bool
    snapshots: int
    sequence_checked: bool
    sem_entries: int
    """The SEM entries the job met, each verified to its checkpointed head."""


class JobService:
    def __init__(self, store: LedgerStore, snapshots: SnapshotService, sem: SemService) -> None:
        self.store = store
        self.snapshots = snapshots
        self.sem = sem
        self._stand_in = StandIn(store, _stand_in_job)

    # Recording a job piece by piece

    def start(
        self,
        job_id: str,
        job_seed: str,
        job_input: str,
        snapshot_ids: dict[str, str],
        capture_mode: CaptureMode = CaptureMode.PROMPTS_ONLY,
        tenant: str = DEFAULT_TENANT,
    ) -> Job:
        """Start a job to be recorded piece by piece."""
        job = Job.start(job_id, job_seed, job_input, snapshot_ids, capture_mode, tenant)
        if self.exists(job_id, tenant=tenant):
            raise ConflictError(f"job {job_id} already exists")
        self.store.save_new(job, what=f"job {job_id}")
        return job

    def record_events(
        self,
        job_id: str,
        events: Sequence[tuple[str, dict[str, Any]]],
        *,
        tenant: str = DEFAULT_TENANT,
    ) -> list[str]:
        """Append facts to a job in one atomic write; returns their deterministic event ids.

        Never a ``JobCompleted``: the ledger records that itself, in the seal's transaction, so a
        completion without a seal can only be tampering (`integrity.check_completion_sealed`).
        """
        if any(event_type == JobCompleted.EVENT_TYPE for event_type, _ in events):
            msg = "JobCompleted is recorded by the ledger itself, with the job's seal"
            raise InvalidInput(msg)
        job = self.get(job_id, tenant=tenant)
        ids = [job.record(event_type, payload) for event_type, payload in events]
        self.store.save_new(job, what=f"events for job {job_id}")
        return ids

    def seal(self, job_id: str, *, tenant: str = DEFAULT_TENANT) -> Job:
        """Seal a job: count and digest its events' MACs, witnessed in the same transaction."""
        job, records = self._load(job_id, tenant)
        witness = _sealed(job, [r.mac for r in records])
        self.store.save_new(job, witness, what=f"seal of job {job_id}")
        return job

    # Running and recording whole jobs: one transaction for the job, its seal and what is
    # stored with it

    def run(
        self,
        text: str,
        seed: str,
        *,
        job_id: str | None = None,
        user: str = "default",
        capture_mode: CaptureMode | None = None,
        snapshot_ids: dict[str, str] | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> ReflectiveLog:
        """Run one job through the Stage-0 runtime and record all of it, sealed.

        ``capture_mode`` None: chosen by what the job does (`domain.capture.chosen_capture`);
        the log returned says which and why (``capture_why``).
        """
        Job.check_start(job_id, seed, text, {})
        validate_tenant(tenant)
        ids, snapshots, unstored = self.snapshots.stage0(snapshot_ids or {})
        memory = self.sem.of(tenant)
        # Run in full_io unless asked: every mode can be had from that by dropping content.
        running = capture_mode or CaptureMode.FULL_IO

        def attempt() -> ReflectiveLog:
            this_id = ""

            def run_over(job_input: str) -> Stage0Run:
                nonlocal this_id
                this_id = self.id_for(job_id, seed, job_input, tenant)
                return run_stage0(this_id, seed, job_input, user, snapshots, memory, running)

            # A value the privacy policy refuses is recorded only as its mark: the job runs
            # over that (again, only when the policy refused something).
            job_input, run = recorded_input(text, run_over, self.refusal_mark)
            mode, why = chosen_capture(capture_mode, run.events)
            job = Job.start(
                this_id, seed, job_input, ids, mode, tenant, job_id_derived=job_id is None
            )
            kept = [e if mode is running else apply_capture(e, mode) for e in run.events]
            for event in kept:
                job.record(event.EVENT_TYPE, event.written_payload())
            configs = (snapshots.selfrep, snapshots.brainstate, snapshots.governance)
            # Another writer may have stored a default since: recheck, or the retry conflicts too.
            if unstored:
                unstored.difference_update(self.snapshots.stored_ids(unstored))
            new_defaults = (
                [s for s in default_snapshots().values() if s.snapshot_id in unstored]
                if unstored
                else []
            )
            present = set(ids.values()) - unstored
            with_job: list[SemEntry | Snapshot] = [*run.sem_writes, *new_defaults]
            # The keys the job only read must still be as it read them when it commits, so
            # that the log holds just before the job what the job met (`replay_sem`).
            read = {SemEntry.id_in(tenant, key): v for key, v in run.sem_reads.items()}
            assert run.brainstate_after is not None  # every run of an iteration folds it
            ran = RanAsRecorded(kept, run.brainstate_after)
            log = self.commit(
                job,
                run.final_output,
                configs,
                with_job,
                present,
                derived=job_id is None,
                unmoved=read,
                ran=ran,
            )
            return replace(log, capture_why=why)

        return self.store.racing(attempt, "run")

    def refusal_mark(self, refused: RefusedValue) -> str:
        """A refused value's mark: its attribute and a digest keyed by the active signing key."""
        key_id, mac = self.store.keyring.sign(refused.digest_message())
        return refusal_mark(refused.attribute, key_id, mac.hex())

    def id_for(self, job_id: str | None, seed: str, job_input: str, tenant: str) -> str:
        """The given id, or seed 004 D3's ``HMAC(seed, "job:" + input + ":" + n)``.

        ``n`` counts the tenant's jobs of the same seed and input before this one: the first
        ``n`` whose id the tenant does not hold. The same jobs in the same order get the same ids
        in any store, whatever else it records meanwhile; two writers deriving the same id at
        once race for its stream, and the loser counts on (`commit`, ``derived``).
        """
        if job_id is not None:
            return job_id
        count = 0
        while self._taken(derived := derive_id(seed, "job", job_input, count), tenant):
            count += 1
        return derived

    def _taken(self, job_id: str, tenant: str) -> bool:
        """Whether a job stream of this id exists for ``tenant``: its own, or (for the default
        tenant, whose stream names are the ids alone) another tenant's from before ids were
        scoped, which a new job could not be stored over either."""
        owner, _ = self._owner_and_name(job_id, tenant)
        if owner is None:
            return False
        return tenant_scoped(tenant, job_id) == job_id or holds(tenant, owner)

    def commit(
        self,
        job: Job,
        final_output: Any,
        configs: tuple[SelfRepConfig | None, BrainStateConfig | None, GovernanceConfig | None],
        with_job: Sequence[MaceAggregate] = (),
        stored: set[str] | None = None,
        *,
        derived: bool = False,
        held_bundles: Set[str] = frozenset(),
        unmoved: Mapping[UUID, int] | None = None,
        ran: RanAsRecorded | None = None,
        held_macs: Sequence[bytes] = (),
    ) -> ReflectiveLog:
        """Close, seal and store a job built in memory, all in one transaction.

        ``with_job``: what is stored with the job (its SEM writes, the snapshots first stored for
        it, a completed run draft). ``stored``: the
        declared snapshot ids the caller already knows are in the ledger (else each is looked up).
        ``derived``: the id was derived (`id_for`), not named by the caller, and found free.
        ``held_bundles``: the policy bundles the ledger holds that the job's events name.
        ``unmoved``: streams the job read, each at the version read: the transaction conflicts if
        one moved on since (`LedgerStore.save_unmoved`). ``ran``: the job's facts as a live run
        here made them (`complete_job`). ``held_macs``: the MACs of the events of ``job`` already
        stored, in version order, for a job read back from its stream (a run sent in batches):
        its stream is its own, and a writer that moved it on since makes the save conflict.
        """
        # A derived id was found free in this same attempt (`id_for`): a writer that took it
        # since makes the insert conflict, and `racing` decides again. A named one is taken
        # when the insert conflicts on the stream's unique key (`_claimed_before`).
        if not held_macs and self._claimed_before(
            job, [a.id for a in with_job if _creates(a)], derived=derived
        ):
            raise ConflictError(f"job {job.job_id} already exists")
        if stored is None:
            stored = self.snapshots.stored_ids(job.snapshot_ids.values())
        stored |= {s.snapshot_id for s in with_job if isinstance(s, Snapshot)}
        completion = complete_job(job, final_output, stored, *configs, held_bundles, ran)
        job.record(JobCompleted.EVENT_TYPE, completion.written_payload())
        completion = completion.as_read_back(job.facts[-1].payload)
        events = list(job.collect_events())
        signed = self.store.verifying_store.signed_mapper.sign_ahead(events)
        witness = _sealed(job, [*held_macs, *(record_mac(record.state) for record in signed)])
        try:
            self.store.save_unmoved(*events, job, witness, *with_job, read=unmoved or {})
        except (IntegrityError, RecordConflictError):
            if not held_macs and not derived and self.exists(job.job_id, tenant=job.tenant):
                raise ConflictError(f"job {job.job_id} already exists") from None
            raise  # another stream of the write moved on: `racing` decides again
        return ReflectiveLog.of(job, None if ran is None else [*ran.events, completion])

    def _claimed_before(self, job: Job, created: Sequence[UUID], *, derived: bool) -> bool:
        """Whether a job the tenant holds already has ``job``'s named id, where the insert's
        unique keys cannot say so themselves, read before the write; ``created``: the other
        streams the write creates (a run's content index), whose absence nobody read either.

        The unique key of each stream the write creates decides whether it was written before,
        but for a stream the newest checkpoint counts: one deleted below it would take the
        insert, so it is read (the head check fails it closed; `HeadCheck`). Their heads are
        proven together, in one read of the head index. A tenant other than the default may also
        hold a job under the id alone, recorded before ids were scoped by tenant, which no key
        of the new stream covers: whose that stream is is read from its first record (as a
        lookup does, at the same cost whoever holds it: `_unscoped_owner`)."""
        scoped = tenant_scoped(job.tenant, job.job_id) != job.job_id
        # A derived id was found free in this attempt (`id_for`), its streams read then. The
        # unscoped stream's bucket is proven with the others, for its read below.
        claimed = [] if derived else [job.id, *([Job.id_for(job.job_id)] if scoped else [])]
        wanted = [*claimed, *created]
        counted = self.store.checkpointed(wanted) if wanted else set()
        written = [stream for stream in created if stream in counted]
        if written:
            # Still held, its insert conflicts; deleted below the checkpoint, this fails closed.
            self.store.require_stored_heads(written)
        if derived:
            return False
        if job.id in counted:
            return self.exists(job.job_id, tenant=job.tenant)
        return scoped and holds(job.tenant, self._unscoped_owner(job.job_id))

    # Reading jobs back

    def verify(
        self, job_id: str, check_sequence: bool = False, *, tenant: str = DEFAULT_TENANT
    ) -> JobVerification:
        """Integrity only: the job's stream (MACs, versions, seal, witness), its snapshots' and
        the SEM entries it read or wrote (`_verify_sem_entries`).

        ``check_sequence`` also checks that the facts run 0, 1, 2... with seed-derived ids.
        """
        job = self.get(job_id, tenant=tenant)
        for kind, snapshot_id in sorted(job.snapshot_ids.items()):
            if not self.store.stream_exists(Snapshot.id_for(snapshot_id)):
                message = f"{kind} snapshot {snapshot_id} is not in the ledger"
                raise MaceError(ErrorCode.MISSING_SNAPSHOT, message, snapshot_id=snapshot_id)
            self.snapshots.get(snapshot_id)
        sem_entries = self._verify_sem_entries(job)
        if check_sequence:
            problem = sequence_problem(job)
            if problem is not None:
                raise IntegrityFailure(job.id, 1, problem)
        return JobVerification(
            job_id=job_id,
            events=job.version,
            sealed=job.sealed,
            snapshots=len(job.snapshot_ids),
            sequence_checked=check_sequence,
            sem_entries=sem_entries,
        )

    def _verify_sem_entries(self, job: Job) -> int:
        """Each SEM entry the job read or wrote, read and verified whole (MACs, versions, and
        not short of the head the newest checkpoint signed: a version deleted below it fails
        here); how many.

        Whether the versions the job claims to have met are the ledger's is no integrity
        question: a claim is refused at ingest or diverges at replay (`replay_sem`), so that
        nothing an emitter sends can make this check fail."""
        sem_facts = [
            decode_recorded(f.event_type, f.payload)
            for f in job.facts
            if f.event_type in {SemRead.EVENT_TYPE, SemWrite.EVENT_TYPE}
        ]
        keys = sorted({key for key, _, _ in versions_met(sem_facts)})
        for key in keys:
            list(self.store.verifying_store.get(SemEntry.id_in(job.tenant, key)))
        return len(keys)

    def get(self, job_id: str, *, tenant: str = DEFAULT_TENANT) -> Job:
        """The tenant's job: another tenant's job of the same id is not found, as none would be."""
        return self._load(job_id, tenant)[0]

    def with_macs(self, job_id: str, *, tenant: str = DEFAULT_TENANT) -> tuple[Job, list[bytes]]:
        """The tenant's job (`get`) and the MACs of its stored events, in version order."""
        job, records = self._load(job_id, tenant)
        return job, [record.mac for record in records]

    def reflective_log(self, job_id: str, *, tenant: str = DEFAULT_TENANT) -> ReflectiveLog:
        return ReflectiveLog.of(self.get(job_id, tenant=tenant))

    def exists(self, job_id: str, *, tenant: str = DEFAULT_TENANT) -> bool:
        """Whether the tenant holds a job of this id (another tenant's does not count)."""
        return self.name(job_id, tenant) is not None

    def name(self, job_id: str, tenant: str = DEFAULT_TENANT) -> str | None:
        """The `Job.scoped_id` of the tenant's job of this id; None when the tenant has none."""
        owner, name = self._owner_and_name(job_id, tenant)
        return name if holds(tenant, owner) else None

    def owned_name(self, job_id: str, tenant: str = DEFAULT_TENANT) -> str:
        """The `Job.scoped_id` of the tenant's job; `NotFoundError` as for none, also when another
        tenant's job has this id (`application.tenancy`)."""
        owner, name = self._owner_and_name(job_id, tenant)
        require_holder(tenant, owner, f"job {job_id}")
        assert name is not None
        return name

    def _owner_and_name(self, job_id: str, tenant: str) -> tuple[str | None, str | None]:
        """Which tenant recorded the job the id names for ``tenant``, and its stream's name.

        The id scoped by the tenant, or the id alone for a job a tenant other than the default
        recorded before ids were scoped by tenant. A stream under the id alone is the tenant its
        JobStarted says (`_started`).
        """
        validate_job_id(job_id)
        scoped = tenant_scoped(tenant, job_id)
        if scoped != job_id and self.store.stream_exists(Job.id_for(scoped)):
            return tenant, scoped
        owner = self._unscoped_owner(job_id)
        return (None, None) if owner is None else (owner, job_id)

    def _unscoped_owner(self, job_id: str) -> str | None:
        """The tenant whose job is stored under the id alone (None: none is), from its stream's
        first record (`_started`)."""
        # Its first version (``lte``, not ``limit``): a read that shows where the stream ends is
        # held against the stream's proven head whether or not it found a record, so that
        # proving it (done for a free id) is not work another tenant's job skips.
        started = self._started(self.store.recorder.select_events(Job.id_for(job_id), lte=1))
        return None if started is None else started.tenant

    def _started(self, records: Sequence[StoredEvent]) -> Job.Started | None:
        """The start of the job whose stream's first records are ``records``, its MAC checked:
        whose the job is. None when there are none, at the same cost (`tenancy.StandIn`): the
        default tenant's names hold other tenants' jobs from before ids were scoped."""
        started = self._stand_in.first(records)
        if started is not None and not isinstance(started, Job.Started):
            raise IntegrityFailure(records[0].originator_id, 1, "stream is not a Job")
        return started

    def stream(self, job_id: str, *, tenant: str = DEFAULT_TENANT) -> list[dict[str, Any]]:
        """A job's events in stream order, as ``mace events`` prints them, each recorded fact
        with its address (`domain.evidence_uri`; the framing events have none)."""
        records = self._load(job_id, tenant)[1]
        decode = self.store.verifying_store.signed_mapper.decode
        entries = [_stream_entry(decode(record)) for record in records]
        for entry in entries:
            index = entry["sequence_index"]
            entry["uri"] = None if index is None else event_uri(tenant, job_id, index)
        return entries

    def _load(self, job_id: str, tenant: str) -> tuple[Job, list[VerifiedRecord]]:
        """The tenant's job, verified in full, with its records; NotFoundError when it has none.

        Whose the job is is decided first (`owned_name`), from its stream's first record alone
        where the stream is named by the id alone: a job another tenant recorded there before
        ids were scoped is not read further, so that it costs what a free id costs (its whole
        stream would take longer to read, check and decode than a stand-in's first record)."""
        return self.load_named(self.owned_name(job_id, tenant))

    def load_named(self, name: str) -> tuple[Job, list[VerifiedRecord]]:
        """The job stored under ``name`` (`owned_name`), verified in full (versions, MACs, seal
        and its witness, both streams read together), with its records."""
        read = self.store.repository.read([Job.id_for(name), JobSealWitness.id_for(name)])
        return self._verified(name, read[Job.id_for(name)], read[JobSealWitness.id_for(name)])

    def _verified(
        self, name: str, stored: Sequence[StoredEvent], witness: Sequence[StoredEvent]
    ) -> tuple[Job, list[VerifiedRecord]]:
        records = verify_stream(self.store.keyring, Job.id_for(name), stored)
        return self._witnessed(name, records, witness), records

    def decoded(self, name: str, records: Sequence[VerifiedRecord]) -> Job:
        """The job stored under ``name`` from its whole stream, read and verified by the caller
        (an audit's scan, which holds seals and witnesses together itself)."""
        return self._decode(Job.id_for(name), records)

    def _witnessed(
        self, name: str, records: Sequence[VerifiedRecord], witness: Sequence[StoredEvent]
    ) -> Job:
        """The job ``records`` (verified) make, its seal held against its witness."""
        job = self._decode(Job.id_for(name), records)
        keyring = self.store.keyring
        self._check_witness(job, verify_stream(keyring, JobSealWitness.id_for(name), witness))
        return job

    def _decode(self, stream: UUID, records: Sequence[VerifiedRecord]) -> Job:
        job = self.store.repository.folded(Job, stream, records)
        if job is None:
            raise IntegrityFailure(stream, 1, "stream is not a Job")
        return job

    def _check_witness(self, job: Job, records: Sequence[VerifiedRecord]) -> None:
        """A witnessed seal (``records``: its stream, verified) must still be in the job's
        stream, and say the same."""
        witness = None
        if records:
            event = self.store.verifying_store.signed_mapper.decode(records[0])
            if not isinstance(event, JobSealWitness.Witnessed):
                stream = records[0].stored.originator_id
                raise IntegrityFailure(stream, 1, "stream is not a seal witness")
            witness = SealFacts(event.event_count, event.mac_digest)
        seal = None
        if job.sealed:
            assert job.sealed_event_count is not None and job.sealed_mac_digest is not None
            seal = SealFacts(job.sealed_event_count, job.sealed_mac_digest)
        check_witness(job.id, job.version, seal, witness)


def _stand_in_job() -> Job:
    """A job started as most are (under the Stage-0 snapshots), never stored: what the lookup
    of a free id checks in place of another tenant's job's start (`tenancy.StandIn`)."""
    declared = {kind.value: d.snapshot_id for kind, d in default_declarations().items()}
    return Job.start("stand-in", "stand-in", "stand-in", declared)


def _creates(aggregate: MaceAggregate) -> bool:
    """Whether saving ``aggregate`` creates its stream: every event it has is still pending."""
    return aggregate.version == len(aggregate.pending_events)


def _sealed(job: Job, macs: Sequence[bytes]) -> JobSealWitness:
    """Seal ``job`` over the MACs of its events (in version order); the seal's witness."""
    digest = mac_digest(macs)
    job.seal(len(macs), digest)
    return JobSealWitness(job_id=job.scoped_id, event_count=len(macs), mac_digest=digest)


def _stream_entry(event: DomainEventProtocol[UUID]) -> dict[str, Any]:
    assert isinstance(event, Job.Event)
    base = {"version": event.originator_version, "timestamp": iso_text(event.timestamp)}
    if isinstance(event, Job.Recorded):
        return base | {
            "sequence_index": event.sequence_index,
            "event_id": event.event_id,
            "event_type": event.event_type,
            "payload": event.payload,
        }
    name = "JobStarted" if isinstance(event, Job.Started) else "JobSealed"
    payload = event.model_dump(
        mode="json",
        exclude={"originator_id", "originator_version", "timestamp", "originator_topic"},
    )
    return base | {"sequence_index": None, "event_id": None, "event_type": name, "payload": payload}
