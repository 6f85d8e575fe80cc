"""What verifying the streams finds besides their MACs and versions, and which failure comes first.

A whole-ledger verify reads the log in notification order, but reports as if it had checked the
streams one after another in stream id order (`FirstFailure`): the first failing stream, or the
first failing seal/witness pair, by the id of the stream that met it. Counting streams, jobs and
sealed jobs, the snapshots completed jobs found, and each seal held to its witness (and each
witness to its seal) are defined here once, for streams checked as their rows pass by
(`log_pass`) and for a stream read back whole (`ledger`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final
from uuid import UUID

import orjson
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import get_topic

from domain.capture import snapshots_found_at_completion
from domain.errors import IntegrityFailure
from domain.events import JobCompleted
from domain.job import DEFAULT_TENANT, Job, JobSealWitness
from domain.naming import tenant_scoped
from domain.snapshot import Snapshot
from infrastructure.storage.keys.keyring import Keyring
from infrastructure.storage.records.integrity import SEAL_TOPIC, SealFacts, check_witness
from infrastructure.storage.records.signed_record import verify_record
from infrastructure.storage.verification.scan import Position

JOB_STARTED_TOPIC: Final = get_topic(Job.Started)
WITNESS_TOPIC: Final = get_topic(JobSealWitness.Witnessed)
SNAPSHOT_TOPIC: Final = get_topic(Snapshot.Declared)  # type: ignore[attr-defined]  # made by @event

StreamOrder = tuple[int, Any]
"""Where a stream id as stored sorts in ``ORDER BY originator_id`` (SQLite's NULL first)."""


def stream_order(stored: object) -> StreamOrder:
    return (0, b"") if stored is None else (1, stored)


OWN: Final = 0
"""A stream's own failure: met before a counterpart check made at the same stream."""
COUNTERPART: Final = 1


class FirstFailure:
    """The failure a pass over the streams in id order would meet first, of those found in any
    order: by the stream that met it, a stream's own failure before its counterpart's."""

    def __init__(self) -> None:
        self._first: tuple[StreamOrder, int, IntegrityFailure] | None = None

    def add(self, stored: object, kind: int, failure: IntegrityFailure) -> None:
        """``failure`` met at the stream whose id is stored as ``stored``."""
        self._keep((stream_order(stored), kind), failure)

    def add_streamless(self, failure: IntegrityFailure) -> None:
        """``failure`` of a row that names no stream (its id is not a UUID): reported before
        any stream's, as a pass by stream meets it while still reading the stream before."""
        self._keep(((-1, b""), OWN), failure)

    def _keep(self, found: tuple[StreamOrder, int], failure: IntegrityFailure) -> None:
        if self._first is None or found < self._first[:2]:
            self._first = (*found, failure)

    def could_precede(self, stored: object) -> bool:
        """Whether a failure met at ``stored`` would come before the first found so far."""
        return self._first is None or stream_order(stored) < self._first[0]

    def raise_first(self) -> None:
        if self._first is not None:
            raise self._first[2]


@dataclass
class StreamFacts:
    """What the streams that verified say, for the verdict and the whole-ledger checks."""

    events: int = 0
    streams: int = 0
    jobs: int = 0
    sealed_jobs: int = 0
    snapshots: set[UUID] = field(default_factory=set)
    found: dict[str, tuple[StreamOrder, str]] = field(default_factory=dict)
    """Each snapshot a completed job found in the ledger, and the first such job in stream
    order (the one a failure names)."""

    def stream(self, events: int) -> None:
        self.events += events
        self.streams += 1

    def sealed_job(
        self,
        stored: object,
        stream: UUID,
        started: dict[str, Any],
        completion: bytes,
        seal_version: int,
        sealed: SealFacts,
    ) -> Counterpart:
        """A sealed job counted, the snapshots it found at completion (``completion``, the body
        before the seal) kept; its seal, to be held to its witness."""
        self.jobs += 1
        self.sealed_jobs += 1
        job_id = job_name(stream, started)
        completed = orjson.loads(completion)
        if completed.get("event_type") == JobCompleted.EVENT_TYPE:
            missing = completed["payload"]["missing_artifacts"]
            order = stream_order(stored)
            for snapshot_id in snapshots_found_at_completion(
                started["snapshot_ids"], missing
            ).values():
                first = self.found.get(snapshot_id)
                if first is None or order < first[0]:
                    self.found[snapshot_id] = (order, job_id)
        return Counterpart(
            (JobSealWitness.id_for(job_id), 1),
            WITNESS_TOPIC,
            stream,
            seal_version,
            sealed,
        )

    def check_snapshots(self) -> None:
        """Every snapshot a completed job found in the ledger is still there."""
        for snapshot_id, (_, job_id) in sorted(self.found.items()):
            stream = Snapshot.id_for(snapshot_id)
            if stream not in self.snapshots:
                reason = f"snapshot {snapshot_id} declared by job {job_id} is gone"
                raise IntegrityFailure(stream, 1, reason)


@dataclass(frozen=True, slots=True)
class Counterpart:
    """A seal or a witness a verified stream holds (what it says: ``met``), and where its
    counterpart is stored: a seal's witness (``topic`` `WITNESS_TOPIC`), or a witness's seal
    (`SEAL_TOPIC`)."""

    position: Position
    topic: str
    job_stream: UUID
    job_version: int  # the seal's version: the job stream's last
    met: SealFacts

    def check(self, found: SealFacts | None) -> None:
        """Hold ``met`` against what its counterpart says (None: not stored)."""
        if self.topic == SEAL_TOPIC:
            check_witness(self.job_stream, self.job_version, found, self.met)
        else:
            check_witness(self.job_stream, self.job_version, self.met, found)


def witness_counterpart(body: bytes) -> Counterpart:
    """A verified witness's body, to be held to the seal it witnessed."""
    witnessed = seal_facts(body)
    job_stream = Job.id_for(orjson.loads(body)["job_id"])
    version = witnessed.event_count + 1
    return Counterpart((job_stream, version), SEAL_TOPIC, job_stream, version, witnessed)


def seal_facts(body: bytes) -> SealFacts:
    """What a verified seal's or witness's body says."""
    fields = orjson.loads(body)
    return SealFacts(fields["event_count"], fields["mac_digest"])


def verified_facts(keyring: Keyring, stored: StoredEvent | None, topic: str) -> SealFacts | None:
    """What a seal or witness record found by position says, once its MAC holds; None when the
    position holds no such record."""
    if stored is None or stored.topic != topic:
        return None
    return seal_facts(verify_record(keyring, stored).body)


def job_name(stream: UUID, started: dict[str, Any]) -> str:
    """The `Job.scoped_id` of the job whose JobStarted body this is, stored in ``stream``.

    JobStarted version 1 had no tenant (the default tenant's job). A job of another tenant
    recorded before ids were scoped by tenant is stored under its id alone.
    """
    scoped = tenant_scoped(started.get("tenant", DEFAULT_TENANT), started["job_id"])
    return scoped if Job.id_for(scoped) == stream else str(started["job_id"])
