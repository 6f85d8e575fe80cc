"""Verify a whole ledger: every MAC, every stream's contiguity, every seal and its witness.

The checkpoint pass (`checkpoint_verification`) runs first, so that tampering below a checkpoint
is named by the first checkpoint that no longer holds and the log position. Then one pass over
the events ordered by stream; memory holds one stream at a time (and the ids of the jobs, scoped
by tenant, to check them against the store's job registry: a job stream deleted whole, or one
written around the registry, is caught there; and the snapshots that completed jobs found in the
ledger, to check that each is still there: a snapshot deleted whole produces no event of its
own). The first failure stops the pass and is reported with its stream and version.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby
from typing import Any
from uuid import UUID

import orjson
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import get_topic

from domain.capture import snapshots_found_at_completion
from domain.events import JobCompleted
from domain.job import DEFAULT_TENANT, Job, JobRegistry, JobSealWitness
from domain.naming import tenant_scoped
from domain.snapshot import Snapshot
from infrastructure.storage.checkpoint_verification import TreeVerification, verify_checkpoints
from infrastructure.storage.checkpoints import Checkpoints
from infrastructure.storage.integrity import SEAL_TOPIC, SealFacts, check_witness, verify_stream
from infrastructure.storage.keyring import Keyring
from infrastructure.storage.scan import StoreReader
from infrastructure.storage.settings import Store
from infrastructure.storage.signed_record import IntegrityFailure, verify_record

JOB_STARTED_TOPIC = get_topic(Job.Started)
WITNESS_TOPIC = get_topic(JobSealWitness.Witnessed)
REGISTERED_TOPIC = get_topic(JobRegistry.Registered)
SNAPSHOT_TOPIC = get_topic(Snapshot.Declared)  # type: ignore[attr-defined]  # made by @event
REGISTRY = JobRegistry.id_for(JobRegistry.STORE)


@dataclass(frozen=True)
class LedgerVerification:
    events: int
    streams: int
    jobs: int
    sealed_jobs: int
    tree: TreeVerification | None  # None: the checkpoint pass was left out (the bench's baseline)


def verify_ledger(
    store: Store, table: str, keyring: Keyring, checkpoints: Checkpoints | None
) -> LedgerVerification:
    """Verify every stream, after the checkpoints unless ``checkpoints`` is None."""
    events = streams = jobs = sealed_jobs = 0
    job_ids: set[str] = set()
    registered: dict[str, int] = {}
    snapshots: set[UUID] = set()
    found: dict[str, str] = {}  # snapshot id: the first job whose completion found it
    with StoreReader(store, table) as reader:
        tree = None if checkpoints is None else verify_checkpoints(checkpoints, reader)
        for stream, group in groupby(reader.scan(), key=lambda r: r.originator_id):
            stream_id = stream if isinstance(stream, UUID) else UUID(stream)
            verified = verify_stream(keyring, stream_id, list(group))
            events += len(verified)
            streams += 1
            first, last = verified[0], verified[-1]
            if stream_id == REGISTRY:
                for record in verified:
                    if record.stored.topic == REGISTERED_TOPIC:
                        registered[orjson.loads(record.body)["job_id"]] = (
                            record.stored.originator_version
                        )
            if first.stored.topic == SNAPSHOT_TOPIC:
                snapshots.add(stream_id)
            if first.stored.topic == JOB_STARTED_TOPIC:
                jobs += 1
                started = orjson.loads(first.body)
                job_id = _job_name(stream_id, started)
                job_ids.add(job_id)
                if last.stored.topic == SEAL_TOPIC:
                    sealed_jobs += 1
                    completion = orjson.loads(verified[-2].body)
                    if completion.get("event_type") == JobCompleted.EVENT_TYPE:
                        missing = completion["payload"]["missing_artifacts"]
                        for snapshot_id in snapshots_found_at_completion(
                            started["snapshot_ids"], missing
                        ).values():
                            found.setdefault(snapshot_id, job_id)
                    witness = reader.record_at(JobSealWitness.id_for(job_id), 1)
                    check_witness(
                        stream_id,
                        last.stored.originator_version,
                        _facts(last.body),
                        _verified_facts(keyring, witness, WITNESS_TOPIC),
                    )
            elif first.stored.topic == WITNESS_TOPIC:
                witnessed = _facts(first.body)
                job_stream = Job.id_for(orjson.loads(first.body)["job_id"])
                seal_version = witnessed.event_count + 1
                seal = reader.record_at(job_stream, seal_version)
                check_witness(
                    job_stream,
                    seal_version,
                    _verified_facts(keyring, seal, SEAL_TOPIC),
                    witnessed,
                )
    _check_registry(job_ids, registered)
    _check_snapshots(found, snapshots)
    return LedgerVerification(
        events=events, streams=streams, jobs=jobs, sealed_jobs=sealed_jobs, tree=tree
    )


def _facts(body: bytes) -> SealFacts:
    fields = orjson.loads(body)
    return SealFacts(fields["event_count"], fields["mac_digest"])


def _verified_facts(keyring: Keyring, stored: StoredEvent | None, topic: str) -> SealFacts | None:
    """What a seal or witness record found by position says, once its MAC holds; None when the
    position holds no such record."""
    if stored is None or stored.topic != topic:
        return None
    return _facts(verify_record(keyring, stored).body)


def _job_name(stream: UUID, started: dict[str, Any]) -> str:
    """The `Job.scoped_id` of the job whose JobStarted body this is, stored in ``stream``.

    JobStarted version 1 had no tenant (the default tenant's job). A job of another tenant
    recorded before ids were scoped by tenant is stored under its id alone.
    """
    scoped = tenant_scoped(started.get("tenant", DEFAULT_TENANT), started["job_id"])
    return scoped if Job.id_for(scoped) == stream else str(started["job_id"])


def _check_registry(job_ids: set[str], registered: dict[str, int]) -> None:
    """Every job is registered once, and every registered job still has its stream."""
    vanished = sorted(set(registered) - job_ids, key=registered.__getitem__)
    if vanished:
        reason = f"registered job {vanished[0]} has no events"
        raise IntegrityFailure(Job.id_for(vanished[0]), 1, reason)
    unregistered = sorted(job_ids - set(registered))
    if unregistered:
        reason = f"job {unregistered[0]} is not in the job registry"
        raise IntegrityFailure(REGISTRY, len(registered) + 1, reason)


def _check_snapshots(found: dict[str, str], stored: set[UUID]) -> None:
    """Every snapshot a completed job found in the ledger is still there."""
    for snapshot_id, job_id in sorted(found.items()):
        stream = Snapshot.id_for(snapshot_id)
        if stream not in stored:
            reason = f"snapshot {snapshot_id} declared by job {job_id} is gone"
            raise IntegrityFailure(stream, 1, reason)
