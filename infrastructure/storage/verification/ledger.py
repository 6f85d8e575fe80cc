"""Verify a whole ledger: every checkpoint, every MAC, every stream's contiguity, every seal and
its witness.

The checkpoint pass (`checkpoint_verification`) holds the log to every checkpoint; its failure is
reported first, so that tampering below a checkpoint is named by the first checkpoint that no
longer holds and the log position (a job stream deleted whole below the newest checkpoint is
caught there and by the head index; one recorded after it is not yet vouched for by anything).
The stream pass reads the events ordered by stream, one stream at a time in memory (and the
snapshots that completed jobs found in the ledger, to check that each is still there: a snapshot
deleted whole produces no event of its own). The first failure stops it and is reported with its
stream and version.

The stored Merkle nodes are held to the tree the log makes below the newest checkpoint, and
reported last: only once the log holds is a node that differs the nodes' own fault.

The stream pass is split by stream id: one part runs beside the rest (`side_pass`), so that the
checkpoint pass costs little more time than a verify without it.
"""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass, field
from functools import partial
from itertools import groupby
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
from infrastructure.storage.checkpoints.chain import Checkpoints
from infrastructure.storage.keys.keyring import Keyring
from infrastructure.storage.records.integrity import (
    SEAL_TOPIC,
    SealFacts,
    check_witness,
    verify_stream,
)
from infrastructure.storage.records.signed_record import verify_record
from infrastructure.storage.settings import Store
from infrastructure.storage.verification.checkpoint_chain import (
    TreeVerification,
    verify_checkpoints,
)
from infrastructure.storage.verification.scan import (
    LOOKUPS_PER_QUERY,
    Position,
    StoreReader,
    StreamRange,
)
from infrastructure.storage.verification.side_pass import (
    PassStopped,
    SidePass,
    Stopped,
    may_fork,
    never_stopped,
)

JOB_STARTED_TOPIC = get_topic(Job.Started)
WITNESS_TOPIC = get_topic(JobSealWitness.Witnessed)
SNAPSHOT_TOPIC = get_topic(Snapshot.Declared)  # type: ignore[attr-defined]  # made by @event


@dataclass(frozen=True)
class LedgerVerification:
    events: int
    streams: int
    jobs: int
    sealed_jobs: int
    tree: TreeVerification | None  # None: the checkpoint pass was left out (the bench's baseline)


def verify_ledger(
    store: Store,
    table: str,
    keyring: Keyring,
    checkpoints: Checkpoints | None,
    *,
    fork: bool | None = None,
) -> LedgerVerification:
    """Verify every stream and, unless ``checkpoints`` is None, every checkpoint.

    Without checkpoints it is one pass in this process (verify as it was before them: the
    bench's baseline). With them the work is split in two: the streams below `SPLIT` in a side
    pass (a forked child where ``fork``, by default where `may_fork`; else a thread), and here
    the checkpoint pass, then the other streams. A checkpoint that no longer holds is reported
    first, then the first failing stream in id order: what one pass after the other reports.
    """
    if checkpoints is None:
        return _finished(_verify_streams(store, table, keyring, (None, None), never_stopped), None)
    lower = partial(_verify_streams, store, table, keyring, (None, SPLIT))
    with SidePass(lower, fork=may_fork() if fork is None else fork) as side:
        with StoreReader(store, table) as reader:
            tree = verify_checkpoints(checkpoints, reader)
        try:
            upper: _StreamFacts | IntegrityFailure = _verify_streams(
                store, table, keyring, (SPLIT, None), never_stopped
            )
        except IntegrityFailure as failure:
            upper = failure  # reported once the streams before it are known to hold
        facts = side.result()
    if isinstance(upper, IntegrityFailure):
        raise upper
    verified = _finished(facts.then(upper), tree)
    if tree.log_nodes is not None:
        raise tree.log_nodes  # the log holds: only what is derived from it is not its own
    return verified


SPLIT: Final = UUID(int=3 * 2**128 // 4)
"""Where the side pass's streams end: 75% of ids (uniform: names hashed by UUIDv5). The checkpoint
pass costs about half a whole stream pass, so with the other 25% this process does about as
much as the side pass. Measured on SQLite (a forked side pass), a verify took least with the
split at 0.75 of 0.6 to 0.8; on PostgreSQL (a thread beside this one) it made no difference."""


@dataclass
class _StreamFacts:
    """What a pass over a range of streams verified, and what the whole-ledger checks need."""

    events: int = 0
    streams: int = 0
    jobs: int = 0
    sealed_jobs: int = 0
    snapshots: set[UUID] = field(default_factory=set)
    found: dict[str, str] = field(default_factory=dict)  # snapshot: first job that found it

    def then(self, later: _StreamFacts) -> _StreamFacts:
        """These facts and those of the streams after them, as one pass over both finds them."""
        found = dict(self.found)
        for snapshot_id, job_id in later.found.items():
            found.setdefault(snapshot_id, job_id)
        return _StreamFacts(
            self.events + later.events,
            self.streams + later.streams,
            self.jobs + later.jobs,
            self.sealed_jobs + later.sealed_jobs,
            self.snapshots | later.snapshots,
            found,
        )


def _finished(facts: _StreamFacts, tree: TreeVerification | None) -> LedgerVerification:
    """The checks that need every stream seen, then the verdict."""
    _check_snapshots(facts.found, facts.snapshots)
    return LedgerVerification(facts.events, facts.streams, facts.jobs, facts.sealed_jobs, tree)


def _verify_streams(
    store: Store, table: str, keyring: Keyring, streams: StreamRange, stopped: Stopped
) -> _StreamFacts:
    """One pass over the range's events ordered by stream (the module's docstring says what it
    checks), until ``stopped`` says its answer is no longer wanted."""
    facts = _StreamFacts()
    # The scan is closed when the pass stops, not when collected: a failure's traceback would
    # keep it, and its server-side cursor, open until a garbage collection.
    with StoreReader(store, table) as reader, closing(reader.scan(streams)) as scanned:
        counterparts = _Counterparts(reader, keyring)
        try:
            for stream, group in groupby(scanned, key=_stream_of):
                if stopped():
                    raise PassStopped
                _verify_one(facts, counterparts, keyring, stream, list(group))
        except IntegrityFailure:
            counterparts.check()  # a failing counterpart of an earlier stream comes first
            raise
        counterparts.check()
    return facts


def _stream_of(stored: StoredEvent) -> UUID | str:
    return stored.originator_id


def _verify_one(
    facts: _StreamFacts,
    counterparts: _Counterparts,
    keyring: Keyring,
    stream: UUID | str,
    group: list[StoredEvent],
) -> None:
    """One stream's events verified and counted; its seal's witness, or its witness's seal, is
    held against it once looked up."""
    stream_id = stream if isinstance(stream, UUID) else UUID(stream)
    verified = verify_stream(keyring, stream_id, group)
    facts.events += len(verified)
    facts.streams += 1
    first, last = verified[0], verified[-1]
    if first.stored.topic == SNAPSHOT_TOPIC:
        facts.snapshots.add(stream_id)
    if first.stored.topic == JOB_STARTED_TOPIC:
        facts.jobs += 1
        started = orjson.loads(first.body)
        job_id = job_name(stream_id, started)
        if last.stored.topic == SEAL_TOPIC:
            facts.sealed_jobs += 1
            completion = orjson.loads(verified[-2].body)
            if completion.get("event_type") == JobCompleted.EVENT_TYPE:
                missing = completion["payload"]["missing_artifacts"]
                for snapshot_id in snapshots_found_at_completion(
                    started["snapshot_ids"], missing
                ).values():
                    facts.found.setdefault(snapshot_id, job_id)
            seal = _Counterpart(
                (JobSealWitness.id_for(job_id), 1),
                WITNESS_TOPIC,
                stream_id,
                last.stored.originator_version,
                seal_facts(last.body),
            )
            counterparts.add(seal)
    elif first.stored.topic == WITNESS_TOPIC:
        witnessed = seal_facts(first.body)
        job_stream = Job.id_for(orjson.loads(first.body)["job_id"])
        version = witnessed.event_count + 1
        counterparts.add(
            _Counterpart((job_stream, version), SEAL_TOPIC, job_stream, version, witnessed)
        )


@dataclass(frozen=True, slots=True)
class _Counterpart:
    """A seal or a witness the pass met (what it says: ``met``), and where its counterpart is
    stored: a seal's witness (``topic`` `WITNESS_TOPIC`), or a witness's seal (`SEAL_TOPIC`)."""

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


class _Counterparts:
    """Seals and witnesses waiting for their counterparts, looked up `LOOKUPS_PER_QUERY` at a
    time (one look-up each was a third of a pass on PostgreSQL) and checked in the order met."""

    def __init__(self, reader: StoreReader, keyring: Keyring) -> None:
        self._reader = reader
        self._keyring = keyring
        self._waiting: list[_Counterpart] = []

    def add(self, counterpart: _Counterpart) -> None:
        self._waiting.append(counterpart)
        if len(self._waiting) >= LOOKUPS_PER_QUERY:
            self.check()

    def check(self) -> None:
        """Look up and check every waiting counterpart; raise the first failure."""
        waiting, self._waiting = self._waiting, []
        stored = self._reader.records_at([c.position for c in waiting])
        for counterpart in waiting:
            found = stored.get(counterpart.position)
            counterpart.check(_verified_facts(self._keyring, found, counterpart.topic))


def seal_facts(body: bytes) -> SealFacts:
    """What a verified seal's or witness's body says."""
    fields = orjson.loads(body)
    return SealFacts(fields["event_count"], fields["mac_digest"])


def _verified_facts(keyring: Keyring, stored: StoredEvent | None, topic: str) -> SealFacts | None:
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


def _check_snapshots(found: dict[str, str], stored: set[UUID]) -> None:
    """Every snapshot a completed job found in the ledger is still there."""
    for snapshot_id, job_id in sorted(found.items()):
        stream = Snapshot.id_for(snapshot_id)
        if stream not in stored:
            reason = f"snapshot {snapshot_id} declared by job {job_id} is gone"
            raise IntegrityFailure(stream, 1, reason)
