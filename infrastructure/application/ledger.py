"""The ledger: one eventsourcing Application holding every MACE aggregate, read as use cases.

Every event it stores is signed by the active key and verified on every read, before decoding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from threading import Lock
from typing import Any, ClassVar, Final, TypeVar
from uuid import UUID

from eventsourcing.application import (
    AggregateNotFoundError,
    Application,
    ProcessingEvent,
    project_aggregate,
)
from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import IntegrityError, RecordConflictError, Recording, StoredEvent
from pydantic import ValidationError

from domain.aggregate import MaceAggregate
from domain.capture import apply_capture
from domain.determinism import derive_id, iso_text
from domain.errors import ErrorCode, MaceError
from domain.events import JobCompleted, RunCompleted, RunEvent, RunStarted
from domain.job import (
    DEFAULT_TENANT,
    CaptureMode,
    Job,
    JobRegistry,
    JobSealWitness,
    sequence_problem,
    validate_job_id,
    validate_tenant,
)
from domain.key_check import KeyCheck
from domain.naming import tenant_and_key, tenant_scoped
from domain.sem import SemEntry, SemRecord, canonical_key
from domain.snapshot import Snapshot, SnapshotKind, check_snapshot_id
from domain.stage0.config import DEFAULT_CONFIGS, BrainStateConfig, SelfRepConfig, parse_config
from domain.stage0.refusals import RefusedValue, refusal_mark
from domain.validation_messages import first_problem
from infrastructure.application.governance import GovernanceService
from infrastructure.application.memories import MemoryService
from infrastructure.application.read_model_sync import ReadModels
from infrastructure.application.receipts import ReceiptService
from infrastructure.application.replays import ReplayService
from infrastructure.storage.connection import check_reachable
from infrastructure.storage.errors import (
    ConflictError,
    LostRace,
    NotFoundError,
    SnapshotError,
    StoreBusyError,
)
from infrastructure.storage.event_store import VerifyingEventStore
from infrastructure.storage.key_checks import KeyChecks
from infrastructure.storage.keyring import Keyring, load_keyring
from infrastructure.storage.mapper import SignedMapper
from infrastructure.storage.repository import LedgerRepository
from infrastructure.storage.schema import StoreSchema
from infrastructure.storage.settings import Settings, SQLiteStore, Store
from infrastructure.storage.signed_record import (
    IntegrityFailure,
    VerifiedRecord,
    mac_digest,
    record_mac,
)
from infrastructure.storage.verification import LedgerVerification, verify_ledger
from projections.reflective_log import ReflectiveLog, complete_job
from projections.refused_input import recorded_input
from projections.stage0_runtime import Stage0Snapshots, run_stage0

__all__ = ["ConflictError", "Ledger", "NotFoundError", "SnapshotError", "default_snapshots"]

A = TypeVar("A", bound=MaceAggregate)
T = TypeVar("T")

ATTEMPTS: Final = 5
"""How often a write that lost a race (job number, SEM entry) is recomputed and retried."""


@dataclass(frozen=True)
class JobVerification:
    job_id: str
    events: int
    sealed: bool
    snapshots: int
    sequence_checked: bool


def default_snapshots() -> dict[SnapshotKind, Snapshot]:
    """The Stage-0 default snapshots, declared (not stored): fresh aggregates on every call."""
    return {
        kind: Snapshot.declare(kind.value, config.model_dump())
        for kind, config in DEFAULT_CONFIGS.items()
    }


class Ledger(Application[UUID]):
    name = "Ledger"
    # Streams are read in full and verified; pages of 1000 keep scans cheap.
    log_section_size = 1000
    env: ClassVar[dict[str, str]] = {}

    def __init__(self, store: Store, keyring: Keyring) -> None:
        self.store = store
        self.keyring = keyring
        # Tables are set up by `open` (writers, `mace init`), never on construction: StoreSchema.
        super().__init__(env=store.eventsourcing_env() | {"CREATE_TABLE": "n"})
        self.key_checks = KeyChecks(self.recorder, keyring)
        self._job_numbering = Lock()
        self.governance = GovernanceService(self)
        self.replays = ReplayService(self)
        self.memories = MemoryService(self)
        self.receipts = ReceiptService(self)

    @cached_property
    def read_models(self) -> ReadModels:
        """The job index, non-replayable jobs, replay outcomes and halts (made on first use)."""
        return ReadModels(self)

    @classmethod
    def open(cls, settings: Settings | None = None, *, create: bool = True) -> Ledger:
        """Open the ledger the settings name; a writer sets up a new store's tables.

        ``create=False`` (readers) neither makes a store nor its tables: one not set up is refused.
        """
        settings = settings or Settings()
        store = settings.parsed_store()
        if isinstance(store, SQLiteStore) and not create and not store.path.exists():
            msg = f"no ledger at {store.describe()} (set MACE_STORE)"
            raise NotFoundError(msg)
        keyring = load_keyring(settings, create=create)
        check_reachable(store, settings.connect_timeout)
        ledger = cls(store, keyring)
        try:
            schema = StoreSchema(ledger)
            if create:
                schema.ensure()
            else:
                schema.require()
            # A key the store contradicts is refused here, before any command reads or writes.
            ledger.key_checks.prove()
        except BaseException:
            ledger.close()
            raise
        return ledger

    def _record(self, processing_event: ProcessingEvent[UUID]) -> list[Recording[UUID]]:
        """Every save: the keys proven first, the missing key checks in the same transaction."""
        events = list(processing_event.events)

        def write(checks: list[KeyCheck.Recorded]) -> list[Recording[UUID]]:
            processing_event.events[:] = [*checks, *events]
            return super(Ledger, self)._record(processing_event)

        return self._with_key_checks(write)

    def insert_records(self, records: Sequence[StoredEvent]) -> None:
        """Store records signed elsewhere (an imported bundle) as they are, keys proven first."""

        def write(checks: list[KeyCheck.Recorded]) -> None:
            self.recorder.insert_events([*map(self.mapper.to_stored_event, checks), *records])

        self._with_key_checks(write)

    def _with_key_checks(self, write: Callable[[list[KeyCheck.Recorded]], T]) -> T:
        """Run ``write`` with the key checks it must carry; a check another writer stored first
        is read and verified, and the write is tried again without it."""
        checks = self.key_checks.unwritten()
        while True:
            try:
                written = write(checks)
            except (IntegrityError, RecordConflictError):
                still = self.key_checks.unwritten()
                if len(still) == len(checks):
                    raise  # the conflict was the write's own
                checks = still
                continue
            self.key_checks.recorded(checks)
            return written

    def construct_mapper(self) -> SignedMapper:
        return SignedMapper(self.keyring)

    def construct_repository(self) -> LedgerRepository:
        return LedgerRepository(event_store=self.events, snapshot_store=self.snapshots)

    def construct_event_store(self) -> VerifyingEventStore:
        assert isinstance(self.mapper, SignedMapper)
        return VerifyingEventStore(self.mapper, self.recorder, self.keyring)

    @property
    def verifying_store(self) -> VerifyingEventStore:
        assert isinstance(self.events, VerifyingEventStore)
        return self.events

    def get_aggregate(self, cls: type[A], aggregate_uuid: UUID, what: str) -> A:
        try:
            aggregate: object = self.repository.get(aggregate_uuid)
        except AggregateNotFoundError:
            raise NotFoundError(f"no {what}") from None
        if not isinstance(aggregate, cls):
            raise IntegrityFailure(aggregate_uuid, 1, f"stream is not a {cls.__name__}")
        return aggregate

    def _save_new(self, *aggregates: MaceAggregate, what: str) -> None:
        try:
            self.save(*aggregates)
        except (IntegrityError, RecordConflictError):
            raise ConflictError(f"{what} already exists or changed concurrently") from None

    # Snapshots

    def put_snapshot(self, snapshot: Snapshot) -> tuple[Snapshot, bool]:
        """Store a declared snapshot; an identical one already stored is returned, not re-stored.

        Returns the stored snapshot and whether this call created it.
        """
        try:
            return self.get_snapshot(snapshot.snapshot_id), False
        except NotFoundError:
            pass
        try:
            self.save(snapshot)
        except (IntegrityError, RecordConflictError):
            # Someone stored the same content between our read and write: same id, same bytes.
            return self.get_snapshot(snapshot.snapshot_id), False
        return snapshot, True

    def get_snapshot(self, snapshot_id: str) -> Snapshot:
        check_snapshot_id(snapshot_id)
        snapshot = self.get_aggregate(
            Snapshot, Snapshot.id_for(snapshot_id), f"snapshot {snapshot_id}"
        )
        # Content-addressed: the id must still follow from what the snapshot says.
        again = Snapshot.declare(
            snapshot.kind, snapshot.payload, snapshot.schema_version, snapshot.seed_namespace
        )
        if (again.snapshot_id, again.config_hash) != (snapshot.snapshot_id, snapshot.config_hash):
            raise IntegrityFailure(snapshot.id, 1, "snapshot id does not match its content")
        return snapshot

    def verify_all(self) -> LedgerVerification:
        """Check every stored event's MAC, every stream's versions, every seal and witness."""
        table = getattr(self.recorder, "events_table_name", None)
        assert isinstance(table, str)
        return verify_ledger(self.store, table, self.keyring)

    # Jobs

    def start_job(
        self,
        job_id: str,
        job_seed: str,
        job_input: str,
        snapshot_ids: dict[str, str],
        capture_mode: CaptureMode = CaptureMode.PROMPTS_ONLY,
        tenant: str = DEFAULT_TENANT,
    ) -> Job:
        """Start a job to be recorded piece by piece; it is numbered in the store's registry."""
        job = Job.start(job_id, job_seed, job_input, snapshot_ids, capture_mode, tenant)

        def attempt() -> Job:
            if self.job_exists(job_id, tenant=tenant):
                raise ConflictError(f"job {job_id} already exists")
            self.save(job, *self._registration(self._registry_version(), job.scoped_id))
            return job

        return self.numbering(attempt, f"start of job {job_id}")

    def record_job_events(
        self,
        job_id: str,
        events: Sequence[tuple[str, dict[str, Any]]],
        *,
        tenant: str = DEFAULT_TENANT,
    ) -> list[str]:
        """Append facts to a job in one atomic write; returns their deterministic event ids."""
        job = self.get_job(job_id, tenant=tenant)
        ids = [job.record(event_type, payload) for event_type, payload in events]
        self._save_new(job, what=f"events for job {job_id}")
        return ids

    def seal_job(self, job_id: str, *, tenant: str = DEFAULT_TENANT) -> Job:
        """Seal a job: count and digest its events' MACs, witnessed in the same transaction."""
        job, records = self._load_job(job_id, tenant)
        digest = mac_digest(r.mac for r in records)
        job.seal(len(records), digest)
        witness = JobSealWitness(job_id=job.scoped_id, event_count=len(records), mac_digest=digest)
        self._save_new(job, witness, what=f"seal of job {job_id}")
        return job

    def verify_job(
        self, job_id: str, check_sequence: bool = False, *, tenant: str = DEFAULT_TENANT
    ) -> JobVerification:
        """Integrity only: the job's stream (MACs, versions, seal, witness), its snapshots' too.

        ``check_sequence`` also checks that the facts run 0, 1, 2... with seed-derived ids.
        """
        job = self.get_job(job_id, tenant=tenant)
        for kind, snapshot_id in sorted(job.snapshot_ids.items()):
            if not self.stream_exists(Snapshot.id_for(snapshot_id)):
                message = f"{kind} snapshot {snapshot_id} is not in the ledger"
                raise MaceError(ErrorCode.MISSING_SNAPSHOT, message, snapshot_id=snapshot_id)
            self.get_snapshot(snapshot_id)
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
        )

    def get_job(self, job_id: str, *, tenant: str = DEFAULT_TENANT) -> Job:
        """The tenant's job: another tenant's job of the same id is not found, as none would be."""
        return self._load_job(job_id, tenant)[0]

    def _load_job(self, job_id: str, tenant: str) -> tuple[Job, list[VerifiedRecord]]:
        """The job, verified in full (versions, MACs, seal and its witness), with its records."""
        records = self._job_records(job_id, tenant)
        job = self._decode_job(records)
        self._check_witness(job)
        return job, records

    def _job_records(self, job_id: str, tenant: str) -> list[VerifiedRecord]:
        """The tenant's job stream, verified record by record; NotFoundError when it has none."""
        name = self.job_name(job_id, tenant)
        if name is None:
            raise NotFoundError(f"no job {job_id}")
        return self.verifying_store.read_verified(Job.id_for(name))

    def _decode_job(self, records: Sequence[VerifiedRecord]) -> Job:
        decode = self.verifying_store.signed_mapper.decode
        job: object = project_aggregate(None, [decode(r) for r in records])
        if not isinstance(job, Job):
            raise IntegrityFailure(records[0].stored.originator_id, 1, "stream is not a Job")
        return job

    def _check_witness(self, job: Job) -> None:
        """A witnessed seal must still be in the job's stream, and say the same."""
        witness_records = self.verifying_store.read_verified(JobSealWitness.id_for(job.scoped_id))
        if not witness_records:
            if job.sealed:
                raise IntegrityFailure(job.id, job.version, "seal has no witness")
            return
        witness = self.verifying_store.signed_mapper.decode(witness_records[0])
        if not isinstance(witness, JobSealWitness.Witnessed):
            stream = witness_records[0].stored.originator_id
            raise IntegrityFailure(stream, 1, "stream is not a seal witness")
        if not job.sealed:
            reason = f"seal missing: witnessed after {witness.event_count} events"
            raise IntegrityFailure(job.id, witness.event_count + 1, reason)
        if (witness.event_count, witness.mac_digest) != (
            job.sealed_event_count,
            job.sealed_mac_digest,
        ):
            raise IntegrityFailure(job.id, job.version, "seal disagrees with its witness")

    # Recording whole jobs: one transaction for the job, its seal, its number and its SEM writes

    def retrying(self, attempt: Callable[[], T], what: str) -> T:
        """Run ``attempt`` again when it lost a race with another writer; it recomputes all."""
        for _ in range(ATTEMPTS):
            try:
                return attempt()
            except (IntegrityError, RecordConflictError, LostRace):
                continue
        raise StoreBusyError(f"{what}: the store kept changing underneath; try again")

    def numbering(self, attempt: Callable[[], T], what: str) -> T:
        """Like `retrying`, for a write that takes the store's next job number.

        Every job takes the next number, so concurrent jobs race for the same one. Within one
        process (the HTTP service's threads) they take turns instead of losing and recomputing;
        between processes the store's version check still decides, and the loser retries.
        """
        with self._job_numbering:
            return self.retrying(attempt, what)

    def _registry_version(self) -> int:
        """The job registry's version: 0 before the first job, then one more per job."""
        registry = JobRegistry.id_for(JobRegistry.STORE)
        last = next(self.verifying_store.get(registry, desc=True, limit=1), None)
        return 0 if last is None else last.originator_version

    @staticmethod
    def _registration(registry_version: int, scoped_id: str) -> list[DomainEventProtocol[UUID]]:
        """The registry events numbering a job (by its `Job.scoped_id`)."""
        if registry_version == 0:
            return JobRegistry.first_registration(scoped_id)
        return [JobRegistry.registration(registry_version, scoped_id)]

    def _commit_job(
        self,
        job: Job,
        registry_version: int,
        final_output: Any,
        configs: tuple[SelfRepConfig | None, BrainStateConfig | None],
        with_job: Sequence[MaceAggregate] = (),
        stored: set[str] | None = None,
        *,
        derived: bool = False,
    ) -> ReflectiveLog:
        """Close, seal, number and store a job built in memory, all in one transaction.

        ``with_job``: what is stored with the job (its SEM writes, the snapshots first stored for
        it, a completed run draft). ``stored``: the
        declared snapshot ids the caller already knows are in the ledger (else each is looked up).
        ``derived``: the id was derived from the job number read for this attempt, not named by
        the caller; if such a job exists, another writer took that number first (`LostRace`).
        """
        if self.job_exists(job.job_id, tenant=job.tenant):
            if derived:
                raise LostRace(f"derived job id {job.job_id} was taken by another writer")
            raise ConflictError(f"job {job.job_id} already exists")
        if stored is None:
            stored = {sid for sid in job.snapshot_ids.values() if self._snapshot_stored(sid)}
        stored |= {s.snapshot_id for s in with_job if isinstance(s, Snapshot)}
        completion = complete_job(job, final_output, stored, *configs)
        job.record(JobCompleted.EVENT_TYPE, completion.payload())
        events = list(job.collect_events())
        macs = [record_mac(self.mapper.to_stored_event(e).state) for e in events]
        digest = mac_digest(macs)
        job.seal(len(events), digest)
        witness = JobSealWitness(job_id=job.scoped_id, event_count=len(events), mac_digest=digest)
        registration = self._registration(registry_version, job.scoped_id)
        self.save(*events, job, witness, *registration, *with_job)
        return ReflectiveLog.of(job)

    def job_exists(self, job_id: str, *, tenant: str = DEFAULT_TENANT) -> bool:
        """Whether the tenant holds a job of this id (another tenant's does not count)."""
        return self.job_name(job_id, tenant) is not None

    def job_name(self, job_id: str, tenant: str = DEFAULT_TENANT) -> str | None:
        """The `Job.scoped_id` of the tenant's job of this id; None when the tenant has none.

        The id scoped by the tenant, or the id alone for a job a tenant other than the default
        recorded before ids were scoped by tenant. A stream under the id alone is the default
        tenant's only if its JobStarted says so (read and verified): no tenant reads another's.
        """
        validate_job_id(job_id)
        scoped = tenant_scoped(tenant, job_id)
        if scoped != job_id and self.stream_exists(Job.id_for(scoped)):
            return scoped
        first = next(iter(self.recorder.select_events(Job.id_for(job_id), limit=1)), None)
        if first is None:
            return None
        started = self.mapper.to_domain_event(first)
        if not isinstance(started, Job.Started):
            raise IntegrityFailure(first.originator_id, 1, "stream is not a Job")
        return job_id if started.tenant == tenant else None

    def stream_exists(self, stream: UUID) -> bool:
        """Whether any event of the stream is stored (nothing is read or verified)."""
        return next(iter(self.recorder.select_events(stream, limit=1)), None) is not None

    def _snapshot_stored(self, snapshot_id: str) -> bool:
        return self._stored_snapshot(snapshot_id) is not None

    def _stored_snapshot(self, snapshot_id: str) -> Snapshot | None:
        try:
            return self.get_snapshot(snapshot_id)
        except NotFoundError:
            return None

    @staticmethod
    def _job_id(job_id: str | None, seed: str, job_input: str, registry_version: int) -> str:
        """The given id, or seed 004 D3's ``HMAC(seed, "job:" + input + ":" + job number)``.

        The job number is how many jobs the store recorded before this one.
        """
        if job_id is not None:
            return job_id
        return derive_id(seed, "job", job_input, max(0, registry_version - 1))

    # Stage-0 jobs

    def default_snapshot_ids(self) -> dict[str, str]:
        """Store the Stage-0 default snapshots (once) and return their ids by kind."""
        ids: dict[str, str] = {}
        for kind, snapshot in default_snapshots().items():
            stored, _ = self.put_snapshot(snapshot)
            ids[kind.value] = stored.snapshot_id
        return ids

    def stage0_snapshots(
        self, overrides: dict[str, str]
    ) -> tuple[dict[str, str], Stage0Snapshots, set[str]]:
        """The snapshots a Stage-0 job runs under: those named, the defaults for the rest.

        Returns their ids by kind, the parsed snapshots, and the ids of defaults not stored yet
        (stored with the first job that uses them, so that refused input writes nothing).
        """
        defaults = default_snapshots()
        ids: dict[str, str] = {}
        payloads: dict[SnapshotKind, dict[str, Any]] = {}
        unstored: set[str] = set()
        for kind in SnapshotKind:
            if kind.value not in overrides:
                default = defaults[kind]
                ids[kind.value] = default.snapshot_id
                payloads[kind] = default.payload
                if not self._snapshot_stored(default.snapshot_id):
                    unstored.add(default.snapshot_id)
                continue
            snapshot = self._named_snapshot(kind, overrides[kind.value])
            ids[kind.value] = snapshot.snapshot_id
            payloads[kind] = snapshot.payload
        return ids, Stage0Snapshots.parse(payloads), unstored

    def _named_snapshot(self, kind: SnapshotKind, snapshot_id: str) -> Snapshot:
        """A stored snapshot a caller named for ``kind``: present, of that kind, usable."""
        try:
            snapshot = self.get_snapshot(snapshot_id)
        except NotFoundError:
            raise SnapshotError(f"no {kind.value} snapshot {snapshot_id} in the ledger") from None
        except ValueError as exc:
            raise SnapshotError(f"{kind.value} snapshot: {exc}") from None
        if snapshot.kind != kind.value:
            msg = f"snapshot {snapshot_id} is a {snapshot.kind} snapshot, not {kind.value}"
            raise SnapshotError(msg)
        try:
            parse_config(kind, snapshot.payload)
        except ValidationError as exc:
            problem = first_problem(exc)
            msg = f"{kind.value} snapshot {snapshot_id} cannot be used: {problem}"
            raise SnapshotError(msg) from None
        return snapshot

    def run_job(
        self,
        text: str,
        seed: str,
        *,
        job_id: str | None = None,
        user: str = "default",
        capture_mode: CaptureMode = CaptureMode.FULL_IO,
        snapshot_ids: dict[str, str] | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> ReflectiveLog:
        """Run one job through the Stage-0 runtime and record all of it, sealed."""
        Job.check_start(job_id, seed, text, {})
        validate_tenant(tenant)
        ids, snapshots, unstored = self.stage0_snapshots(snapshot_ids or {})
        memory = TenantSem(self, tenant)
        # A value the privacy policy refuses is recorded only as its mark: the job runs over that.
        text = recorded_input(text, seed, user, snapshots, memory, capture_mode, self.refusal_mark)

        def attempt() -> ReflectiveLog:
            version = self._registry_version()
            this_id = self._job_id(job_id, seed, text, version)
            job = Job.start(this_id, seed, text, ids, capture_mode, tenant)
            run = run_stage0(this_id, seed, text, user, snapshots, memory, capture_mode)
            for event in run.events:
                job.record(event.EVENT_TYPE, event.payload())
            configs = (snapshots.selfrep, snapshots.brainstate)
            # Another writer may have stored a default since: recheck, or the retry conflicts too.
            unstored.intersection_update(s for s in unstored if not self._snapshot_stored(s))
            new_defaults = [s for s in default_snapshots().values() if s.snapshot_id in unstored]
            present = set(ids.values()) - unstored
            with_job: list[SemEntry | Snapshot] = [*run.sem_writes, *new_defaults]
            return self._commit_job(
                job, version, run.final_output, configs, with_job, present, derived=job_id is None
            )

        return self.numbering(attempt, "run")

    def refusal_mark(self, refused: RefusedValue) -> str:
        """A refused value's mark: its attribute and a digest keyed by the active signing key."""
        key_id, mac = self.keyring.sign(refused.digest_message())
        return refusal_mark(refused.attribute, key_id, mac.hex())

    # Runs recorded by an outside emitter

    def record_run(
        self,
        started: RunStarted,
        events: Sequence[RunEvent],
        completed: RunCompleted,
        tenant: str = DEFAULT_TENANT,
        alongside: Callable[[str], Sequence[MaceAggregate]] = lambda job_id: (),
    ) -> ReflectiveLog:
        """Record a run produced elsewhere (start, events, completion) as one sealed job.

        ``alongside`` makes, afresh for each attempt and given the job's id, aggregates to save
        in the job's own transaction (a run draft marked complete, the run's content index).
        """
        validate_tenant(tenant)
        capture = CaptureMode(started.capture_mode)
        ids = {kind.value: sid for kind, sid in started.snapshot_ids.items()}
        # Each declared snapshot is read once: content-addressed, it cannot change between tries.
        found = {kind: self._stored_snapshot(sid) for kind, sid in ids.items()}
        stored = {snapshot.snapshot_id for snapshot in found.values() if snapshot is not None}
        configs = (
            _config_if_usable(found.get(SnapshotKind.SELFREP.value), SnapshotKind.SELFREP),
            _config_if_usable(found.get(SnapshotKind.BRAINSTATE.value), SnapshotKind.BRAINSTATE),
        )

        def attempt() -> ReflectiveLog:
            version = self._registry_version()
            job_id = self._job_id(started.job_id, started.seed_text, started.input, version)
            job = Job.start(job_id, started.seed_text, started.input, ids, capture, tenant)
            for event in events:
                captured = apply_capture(event, capture)
                job.record(captured.EVENT_TYPE, captured.payload())
            return self._commit_job(
                job,
                version,
                completed.final_output,
                configs,
                alongside(job_id),
                set(stored),
                derived=started.job_id is None,
            )

        return self.numbering(attempt, "record run")

    # Reading jobs back

    def reflective_log(self, job_id: str, *, tenant: str = DEFAULT_TENANT) -> ReflectiveLog:
        return ReflectiveLog.of(self.get_job(job_id, tenant=tenant))

    def job_ids(self, tenant: str = DEFAULT_TENANT) -> Iterator[str]:
        """The tenant's jobs in the order this store recorded them."""
        registry = JobRegistry.id_for(JobRegistry.STORE)
        for event in self.verifying_store.get(registry):
            if not isinstance(event, JobRegistry.Registered):
                continue
            owner, job_id = tenant_and_key(event.job_id)
            if owner != DEFAULT_TENANT:
                if owner == tenant:
                    yield job_id
            elif self.job_name(job_id, tenant) == event.job_id:  # its JobStarted says whose
                yield job_id

    def job_stream(self, job_id: str, *, tenant: str = DEFAULT_TENANT) -> list[dict[str, Any]]:
        """A job's events in stream order, as ``mace events`` prints them."""
        records = self._job_records(job_id, tenant)
        self._check_witness(self._decode_job(records))
        decode = self.verifying_store.signed_mapper.decode
        return [_stream_entry(decode(record)) for record in records]

    # Semantic memory: each tenant's own (`SemEntry`, its key scoped by tenant)

    def sem_entry(self, tenant: str, key: str) -> SemEntry | None:
        """The tenant's stored SEM entry under a canonical key."""
        stream = SemEntry.id_in(tenant, key)
        try:
            return self.get_aggregate(SemEntry, stream, f"SEM entry {key} of tenant {tenant}")
        except NotFoundError:
            return None

    def sem_get(
        self,
        raw_key: str,
        snapshot_ids: dict[str, str] | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> tuple[str, SemRecord]:
        """S7: the tenant's record under a key, after S1-S4; a miss says so (S9)."""
        validate_tenant(tenant)
        key = canonical_key(raw_key, self.stage0_snapshots(snapshot_ids or {})[1].brainstate.sem)
        entry = self.sem_entry(tenant, key)
        return key, (SemRecord(exists=False) if entry is None else entry.read())

    def sem_put(
        self,
        raw_key: str,
        value: Any,
        snapshot_ids: dict[str, str] | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> tuple[str, SemRecord]:
        """S5/S8: store a tenant's fact from outside any job; the write is an event on the key."""
        validate_tenant(tenant)
        snapshots = self.stage0_snapshots(snapshot_ids or {})[1]
        key = canonical_key(raw_key, snapshots.brainstate.sem)
        snapshots.privacy.check_storable(key)

        def attempt() -> SemRecord:
            entry = self.sem_entry(tenant, key)
            if entry is None:
                entry = SemEntry.first_write(tenant, key, value, "cli")
            else:
                entry.write(value, "cli")
            self.save(entry)
            return entry.read()

        return key, self.retrying(attempt, f"SEM write to {key}")


@dataclass(frozen=True)
class TenantSem:
    """One tenant's SEM in the ledger, as the Stage-0 runtime reads it (`SemSource`)."""

    ledger: Ledger
    tenant: str

    def entry(self, key: str) -> SemEntry | None:
        return self.ledger.sem_entry(self.tenant, key)


def _config_if_usable(snapshot: Snapshot | None, kind: SnapshotKind) -> Any:
    """The parsed configuration a stored snapshot of ``kind`` holds, if it is one and usable."""
    if snapshot is None or snapshot.kind != kind.value:
        return None
    try:
        return parse_config(kind, snapshot.payload)
    except ValueError:
        return None


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
