"""An eventsourcing EventStore that verifies a whole read before decoding any of it."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from typing import Any
from uuid import UUID

from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import AggregateRecorder, EventStore

from domain.errors import IntegrityFailure
from infrastructure.storage.keys.keyring import Keyring
from infrastructure.storage.records.integrity import verify_stream
from infrastructure.storage.records.mapper import SignedMapper
from infrastructure.storage.records.signed_record import VerifiedRecord, verify_record


class VerifyingEventStore(EventStore[UUID]):
    def __init__(self, mapper: SignedMapper, recorder: AggregateRecorder, keyring: Keyring) -> None:
        super().__init__(mapper=mapper, recorder=recorder)
        self.signed_mapper = mapper
        self.keyring = keyring

    def read_verified(self, originator_id: UUID) -> list[VerifiedRecord]:
        """Every stored event of one stream, verified (versions, MACs, seal), not yet decoded."""
        records = self.recorder.select_events(originator_id)
        return verify_stream(self.keyring, originator_id, records)

    def get(
        self,
        originator_id: UUID,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
        **_: Any,
    ) -> Iterator[DomainEventProtocol[UUID]]:
        records = self.recorder.select_events(originator_id, gt=gt, lte=lte, desc=desc, limit=limit)
        if desc:
            verified = [verify_record(self.keyring, r) for r in records]
            for newer, older in pairwise(verified):
                expected = newer.stored.originator_version - 1
                if older.stored.originator_version != expected:
                    raise IntegrityFailure(
                        originator_id, expected, f"version {expected} is missing"
                    )
        else:
            verified = verify_stream(self.keyring, originator_id, records, (gt or 0) + 1)
        return iter([self.signed_mapper.decode(r) for r in verified])
