"""The ledger: one eventsourcing Application holding every MACE aggregate, read as use cases.

Every event it stores is signed by the active key and verified on every read, before decoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application, project_aggregate
from eventsourcing.persistence import IntegrityError, RecordConflictError

from domain.aggregate import MaceAggregate
from domain.job import CaptureMode, Job, JobSealWitness, validate_job_id
from domain.snapshot import SNAPSHOT_ID_PATTERN, Snapshot
from infrastructure.event_store import VerifyingEventStore
from infrastructure.keyring import Keyring, load_keyring
from infrastructure.ledger_verification import LedgerVerification, verify_ledger
from infrastructure.mapper import SignedMapper
from infrastructure.settings import Settings, SQLiteStore, Store
from infrastructure.signed_record import IntegrityFailure, VerifiedRecord, mac_digest

A = TypeVar("A", bound=MaceAggregate)


class NotFoundError(LookupError):
    """The named job, snapshot or other record is not in the ledger."""


class ConflictError(ValueError):
    """The record already exists, or changed underneath this command."""


class Ledger(Application[UUID]):
    name = "Ledger"
    # Streams are read in full and verified; pages of 1000 keep scans cheap.
    log_section_size = 1000
    env: ClassVar[dict[str, str]] = {}

    def __init__(self, store: Store, keyring: Keyring) -> None:
        self.store = store
        self.keyring = keyring
        super().__init__(env=store.eventsourcing_env())

    @classmethod
    def open(cls, settings: Settings | None = None, *, create: bool = True) -> Ledger:
        """Open the ledger the settings name. ``create=False`` refuses to make a new store."""
        settings = settings or Settings()
        store = settings.parsed_store()
        if isinstance(store, SQLiteStore) and not create and not store.path.exists():
            msg = f"no ledger at {store.describe()} (set MACE_STORE)"
            raise NotFoundError(msg)
        keyring = load_keyring(settings, create=create)
        return cls(store, keyring)

    def construct_mapper(self) -> SignedMapper:
        return SignedMapper(self.keyring)

    def construct_event_store(self) -> VerifyingEventStore:
        assert isinstance(self.mapper, SignedMapper)
        return VerifyingEventStore(self.mapper, self.recorder, self.keyring)

    @property
    def verifying_store(self) -> VerifyingEventStore:
        assert isinstance(self.events, VerifyingEventStore)
        return self.events

    def _get(self, cls: type[A], aggregate_uuid: UUID, what: str) -> A:
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
        if not SNAPSHOT_ID_PATTERN.fullmatch(snapshot_id):
            msg = f"invalid snapshot id {snapshot_id!r}: expected 64 lowercase hex characters"
            raise ValueError(msg)
        snapshot = self._get(Snapshot, Snapshot.id_for(snapshot_id), f"snapshot {snapshot_id}")
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
    ) -> Job:
        job = Job.start(job_id, job_seed, job_input, snapshot_ids, capture_mode)
        self._save_new(job, what=f"job {job_id}")
        return job

    def record_job_events(
        self, job_id: str, events: Sequence[tuple[str, dict[str, Any]]]
    ) -> list[str]:
        """Append facts to a job in one atomic write; returns their deterministic event ids."""
        job = self.get_job(job_id)
        ids = [job.record(event_type, payload) for event_type, payload in events]
        self._save_new(job, what=f"events for job {job_id}")
        return ids

    def seal_job(self, job_id: str) -> Job:
        """Seal a job: count and digest its events' MACs, witnessed in the same transaction."""
        job, records = self._load_job(job_id)
        digest = mac_digest(r.mac for r in records)
        job.seal(len(records), digest)
        witness = JobSealWitness(job_id=job_id, event_count=len(records), mac_digest=digest)
        self._save_new(job, witness, what=f"seal of job {job_id}")
        return job

    def get_job(self, job_id: str) -> Job:
        return self._load_job(job_id)[0]

    def _load_job(self, job_id: str) -> tuple[Job, list[VerifiedRecord]]:
        """The job, verified in full (versions, MACs, seal and its witness), with its records."""
        validate_job_id(job_id)
        records = self.verifying_store.read_verified(Job.id_for(job_id))
        if not records:
            raise NotFoundError(f"no job {job_id}")
        job = self._decode_job(records)
        self._check_witness(job)
        return job, records

    def _decode_job(self, records: Sequence[VerifiedRecord]) -> Job:
        decode = self.verifying_store.signed_mapper.decode
        job: object = project_aggregate(None, [decode(r) for r in records])
        if not isinstance(job, Job):
            raise IntegrityFailure(records[0].stored.originator_id, 1, "stream is not a Job")
        return job

    def _check_witness(self, job: Job) -> None:
        """A witnessed seal must still be in the job's stream, and say the same."""
        witness_records = self.verifying_store.read_verified(JobSealWitness.id_for(job.job_id))
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
