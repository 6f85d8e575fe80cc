"""Whole-stream checks: contiguous versions, every MAC, the seal if there is one, its witness.

A job's completion (``JobCompleted``) is written in one transaction with its seal, right before
it: a stream that ends at its completion has lost its seal, which only tampering can do.

A stream is verified completely before any of it is decoded, so a caller never sees an event from
a stream that has been tampered with anywhere. A job's seal and its witness are held against each
other here, once, for reading a job and for verifying a whole store alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

import orjson
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import get_topic

from domain.errors import IntegrityFailure
from domain.events import JobCompleted
from domain.job import Job
from infrastructure.storage.keys.keyring import Keyring
from infrastructure.storage.records.signed_record import (
    RecordCheck,
    VerifiedRecord,
    mac_digest,
    verify_record,
)

SEAL_TOPIC = get_topic(Job.Sealed)
RECORDED_TOPIC = get_topic(Job.Recorded)


def verify_stream(
    keyring: Keyring,
    stream: UUID | str,
    records: Sequence[StoredEvent],
    first_version: int = 1,
    check: RecordCheck | None = None,
) -> list[VerifiedRecord]:
    """Verify ``records`` (ascending) as the stream's versions from ``first_version`` on.

    With ``check`` (a pass over many streams holds one), each record's MAC is checked by it;
    a record it does not accept is judged by `verify_record`, which says why it fails."""
    verified: list[VerifiedRecord] = []
    expected = first_version
    for stored in records:
        if stored.originator_version != expected:
            reason = f"version {expected} is missing (next stored is {stored.originator_version})"
            raise IntegrityFailure(stream, expected, reason)
        record = None if check is None else check.verified(stored)
        verified.append(verify_record(keyring, stored) if record is None else record)
        expected += 1
    if first_version == 1:
        check_seal(stream, verified)
        check_completion_sealed(stream, verified)
    return verified


def check_completion_sealed(stream: UUID | str, verified: Sequence[VerifiedRecord]) -> None:
    """A job's completion is followed by its seal: only the last event can lack one."""
    if not verified or verified[-1].stored.topic != RECORDED_TOPIC:
        return
    last = verified[-1]
    if orjson.loads(last.body).get("event_type") == JobCompleted.EVENT_TYPE:
        reason = "seal missing: the job's completion is not followed by its seal"
        raise IntegrityFailure(stream, last.stored.originator_version + 1, reason)


def check_seal(stream: UUID | str, verified: Sequence[VerifiedRecord]) -> None:
    """A sealed stream ends at its seal, which counts and digests everything before it."""
    for position, record in enumerate(verified):
        if record.stored.topic != SEAL_TOPIC:
            continue
        version = record.stored.originator_version
        if position != len(verified) - 1:
            raise IntegrityFailure(stream, version + 1, "event recorded after the seal")
        seal = orjson.loads(record.body)
        if seal.get("event_count") != position:
            reason = f"seal counts {seal.get('event_count')} events, stream has {position}"
            raise IntegrityFailure(stream, version, reason)
        if seal.get("mac_digest") != mac_digest(r.mac for r in verified[:position]):
            raise IntegrityFailure(stream, version, "seal digest does not match the stream's MACs")


@dataclass(frozen=True)
class SealFacts:
    """What a job's seal, or its witness, says: the events before the seal, their MACs' digest."""

    event_count: int
    mac_digest: str


def check_witness(
    job_stream: UUID, job_version: int, seal: SealFacts | None, witness: SealFacts | None
) -> None:
    """A job's seal and its witness are both stored or neither is, and they say the same.

    ``job_version`` is the job stream's last version; ``seal`` None: the job is not sealed.
    """
    if witness is None:
        if seal is not None:
            raise IntegrityFailure(job_stream, job_version, "seal has no witness")
        return
    if seal is None:
        reason = f"seal missing: witnessed after {witness.event_count} events"
        raise IntegrityFailure(job_stream, witness.event_count + 1, reason)
    if seal != witness:
        raise IntegrityFailure(job_stream, job_version, "seal disagrees with its witness")
