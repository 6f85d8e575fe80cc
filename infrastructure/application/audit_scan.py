"""One worker's part of a batch audit: a range of streams, read once in notification order.

Every event is verified with its stream's versions, its MAC checked once by the range's
`RecordCheck` (keyed once; a record it does not accept is judged by `verify_record`, which says
why). A job's events are kept until its seal arrives (a Stage-0 job or an ingested run is stored
in one transaction, so that is soon); then its whole stream is verified as a read of the job
verifies it (`verify_stream`: versions, MACs, seal; `JobService.decoded`), and it is replayed in
audit mode through the live replay (`ReplayService.replay_verified`): the same reducers,
`run_stage0` and comparisons, the same verified reads of its snapshots, halts and SEM history;
each snapshot and halt record read, verified and judged once for the whole range
(`SharedReads`), not once for every job naming it. Any other stream is verified event by event
and forgotten, but for its last version (the audit holds every stream to the newest
checkpoint's head). A job still open when the range ends is verified, not replayed. Each seal
and each seal's witness is kept (its count and digest), for the audit to hold them together once
every range is read: without a read of the other stream per job, which on PostgreSQL cost more
than the replays.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from uuid import UUID

import orjson
from eventsourcing.persistence import StoredEvent

from domain.checkpoint import CHECKPOINT_STREAM
from domain.errors import IntegrityFailure, MaceError
from domain.job import DEFAULT_TENANT
from infrastructure.application.jobs import JobService
from infrastructure.application.replays import ReplayService, SharedReads
from infrastructure.storage.keys.keyring import Keyring
from infrastructure.storage.records.integrity import SEAL_TOPIC, verify_stream
from infrastructure.storage.records.signed_record import RecordCheck, VerifiedRecord
from infrastructure.storage.store import LedgerStore
from infrastructure.storage.verification.ledger import (
    JOB_STARTED_TOPIC,
    WITNESS_TOPIC,
    job_name,
    seal_facts,
)
from infrastructure.storage.verification.scan import StoreReader, StreamRange
from projections.audit import (
    AuditFindings,
    AuditScope,
    JobAudit,
    StreamFailure,
    Verdict,
    integrity_failed,
    judged,
)

PROGRESS_EVERY = 2000
"""Events between two progress reports of a worker."""

Progress = Callable[[int], None]
"""Told how many events this worker has read so far."""


@dataclass(frozen=True)
class AuditWindow:
    """The log an audit reads: the scope, notifications after ``scope.since`` up to ``through``,
    and the last one the newest checkpoint covers (``checkpointed``)."""

    scope: AuditScope
    through: int
    checkpointed: int


@dataclass
class _OpenJob:
    stream: UUID
    records: list[StoredEvent] = field(default_factory=list)


class RangeAudit:
    """The audit of the streams in one range; `run` reads them and returns what it found."""

    def __init__(
        self, store: LedgerStore, jobs: JobService, replays: ReplayService, window: AuditWindow
    ) -> None:
        self.store = store
        self.jobs = jobs
        self.replays = replays
        self.window = window
        self.keyring: Keyring = store.keyring
        # Each record's MAC checked as the scan takes it, by a check keyed once for the range;
        # a record it does not accept is judged by the general path, which says why.
        self._check = RecordCheck(store.keyring)
        self.found = AuditFindings()
        # The declared snapshots and the halt records over them, read once for every job.
        self._shared = SharedReads()
        # Streams by their text: made once for a run of a stream's events, a string keeps its
        # hash, where a UUID computes it again at each look-up (three an event, before).
        self._open: dict[str, _OpenJob] = {}
        # Sealed job streams, by the name their JobStarted gives (None: it did not verify).
        self._sealed: dict[str, str | None] = {}
        self._failed: set[str] = set()
        # The stream of the last event read, and its text.
        self._last_stream: UUID | None = None
        self._last_text = ""

    def run(self, streams: StreamRange, progress: Progress) -> AuditFindings:
        table = getattr(self.store.recorder, "events_table_name", None)
        assert isinstance(table, str)
        window = self.window
        with (
            StoreReader(self.store.location, table) as reader,
            closing(reader.in_log_order(streams, window.scope.since, window.through)) as log,
        ):
            for notification_id, stored in log:
                self._take(notification_id, stored)
                if self.found.events % PROGRESS_EVERY == 0:
                    progress(self.found.events)
        for _, job in sorted(self._open.items()):  # the text of UUIDs sorts as they do
            self._left_open(job.stream, job)
        progress(self.found.events)
        return self.found

    def _take(self, notification_id: int, stored: StoredEvent) -> None:
        stream, version = stored.originator_id, stored.originator_version
        assert isinstance(stream, UUID)
        if stream is not self._last_stream:  # the log holds a stream's events together, mostly
            self._last_stream, self._last_text = stream, str(stream)
        text = self._last_text
        before = self.found.heads.get(text)
        # The checkpoints' own stream is chained, not in the tree: never "not yet checkpointed".
        covered = notification_id <= self.window.checkpointed or stream == CHECKPOINT_STREAM
        self.found.saw(notification_id, text, version, covered=covered)
        if text in self._failed:
            return  # reported once, at its first failure
        if text in self._sealed:
            # The job was judged at its seal: a later event fails it, as any read of it would.
            after_seal = IntegrityFailure(stream, version, "event recorded after the seal")
            name = self._sealed[text]
            if name is not None and self.found.failed_job(name, after_seal.message):
                self._failed.add(text)
            else:
                self._stream_failed(stream, after_seal)
            return
        job = self._open.get(text)
        if job is None and version == 1 and stored.topic == JOB_STARTED_TOPIC:
            job = self._open[text] = _OpenJob(stream)
        if job is not None:
            job.records.append(stored)
            if stored.topic == SEAL_TOPIC:
                del self._open[text]
                self._sealed[text] = self._job_sealed(stream, job.records)
            return
        # Any other stream, or a job begun before the window: verified event by event, its
        # versions contiguous from 1 (from where the window meets it, with ``since``).
        began_before = self.window.scope.since and before is None
        expected = version if began_before else (before or 0) + 1
        try:
            verified = verify_stream(
                self.keyring, stream, [stored], first_version=expected, check=self._check
            )
        except IntegrityFailure as failure:
            self._stream_failed(stream, failure)
            return
        if stored.topic == SEAL_TOPIC:  # a job begun before the window, sealed in it
            self.found.earlier_seals.add(str(stream))
        if version == 1 and stored.topic == WITNESS_TOPIC:
            witnessed = seal_facts(verified[0].body)
            witnessed_job = str(orjson.loads(verified[0].body)["job_id"])
            self.found.witnesses[witnessed_job] = (witnessed.event_count, witnessed.mac_digest)

    def _job_sealed(self, stream: UUID, records: list[StoredEvent]) -> str | None:
        """Judge the job whose seal was just read; its name (None: its start did not verify).

        The stream is verified whole first, its start among it, and the job named from that
        verified start: each record's MAC checked once. Only a stream that fails is asked
        whether its start verifies alone, which decides whether a job can be named."""
        try:
            verified = verify_stream(self.keyring, stream, records, check=self._check)
        except IntegrityFailure as failure:
            started = self._started(stream, records)
            if started is None:
                return None
            self._judged(integrity_failed(started[0], str(stream), failure.message))
            return started[0]
        name, tenant = _named(stream, verified[0])
        try:
            seal = verified[-1]
            facts = seal_facts(seal.body)
            version = seal.stored.originator_version
            self.found.seals[name] = (str(stream), version, facts.event_count, facts.mac_digest)
            if not self._audited(tenant):
                return name  # its events verified, its seal kept for its witness
            job = self.jobs.decoded(name, verified)
        except IntegrityFailure as failure:
            self._judged(integrity_failed(name, str(stream), failure.message))
            return name
        try:
            outcome = self.replays.replay_verified(job, self._shared)
        except MaceError as exc:  # a read the replay made failed other than as tampering
            code, message = exc.code.value, exc.message
            self._judged(JobAudit(name, str(stream), Verdict.NOT_REPLAYABLE, code, message))
            return name
        self._judged(judged(name, str(stream), outcome))
        return name

    def _left_open(self, stream: UUID, job: _OpenJob) -> None:
        started = self._started(stream, job.records)
        if started is None:
            return
        name, tenant = started
        try:
            verify_stream(self.keyring, stream, job.records, check=self._check)
        except IntegrityFailure as failure:
            self._judged(integrity_failed(name, str(stream), failure.message))
            return
        if self._audited(tenant):
            self._judged(JobAudit(name, str(stream), Verdict.OPEN, None, "open: not sealed"))

    def _started(self, stream: UUID, records: list[StoredEvent]) -> tuple[str, str] | None:
        """The job's name and tenant from its JobStarted, verified first; None (the stream
        reported as a failure) when even that does not verify: nothing then names the job."""
        try:
            first = verify_stream(
                self.keyring, stream, records[:1], first_version=1, check=self._check
            )[0]
        except IntegrityFailure as failure:
            self._stream_failed(stream, failure)
            return None
        return _named(stream, first)

    def _audited(self, tenant: str) -> bool:
        wanted = self.window.scope.tenant
        return wanted is None or tenant == wanted

    def _judged(self, result: JobAudit) -> None:
        self.found.jobs.append(result)

    def _stream_failed(self, stream: UUID, failure: IntegrityFailure) -> None:
        self._failed.add(str(stream))
        self.found.stream_failures.append(
            StreamFailure(failure.stream, failure.version, failure.reason)
        )


def _named(stream: UUID, start: VerifiedRecord) -> tuple[str, str]:
    """The name and tenant of the job whose verified start is ``start``."""
    body = orjson.loads(start.body)
    return job_name(stream, body), str(body.get("tenant", DEFAULT_TENANT))
