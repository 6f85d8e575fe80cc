"""The ledger's repository: the one way an aggregate is read, every record verified first.

A stream's records are read (one stream, or many in one round trip: `read`), each verified
(versions contiguous from 1, MACs, the seal: `verify_stream`) before anything of it is decoded,
then folded into the aggregate and its type checked (`aggregate`). `get` (one, `NotFoundError`
when there is none), `find` (one or None) and `get_many` (several, read together) are that path;
a use case that reads streams of several kinds in one round trip calls `read` and then
`aggregate` on each. (eventsourcing's own ``get`` reads through the same verifying event store,
and nothing of the ledger calls it.)

Each record is decoded once, then the events folded as the aggregate's class folds a stream read
back (`MaceAggregate.folded`: each event's ``mutate``; a job takes its recorded facts directly).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar
from uuid import UUID

from eventsourcing.application import Repository
from eventsourcing.persistence import StoredEvent

from domain.aggregate import MaceAggregate
from domain.errors import IntegrityFailure, NotFoundError
from infrastructure.storage.records.event_store import VerifyingEventStore
from infrastructure.storage.records.integrity import verify_stream
from infrastructure.storage.records.signed_record import VerifiedRecord

A = TypeVar("A", bound=MaceAggregate)
SelectStreams = Callable[[Sequence[UUID]], dict[UUID, Sequence[StoredEvent]]]


class LedgerRepository(Repository[UUID]):
    @property
    def _events(self) -> VerifyingEventStore:
        assert isinstance(self.event_store, VerifyingEventStore)
        return self.event_store

    def read(self, streams: Sequence[UUID]) -> dict[UUID, Sequence[StoredEvent]]:
        """Every stored record of each stream, read together, each stream held against its
        checkpointed head; nothing verified yet (`aggregate` does)."""
        recorder = self._events.recorder
        # The ledger's recorders read many streams in one round trip, each held against its
        # checkpointed head (`HeadCheckedReads`); a bundle's, held in memory, has none to save.
        select_streams: SelectStreams | None = getattr(recorder, "select_streams", None)
        if select_streams is not None:
            return select_streams(streams)
        return {stream: recorder.select_events(stream) for stream in streams}

    def aggregate(self, cls: type[A], stream: UUID, records: Sequence[StoredEvent]) -> A | None:
        """The aggregate a whole stream's records make, each verified (versions, MACs, seal)
        before it is decoded, of type ``cls``; None when there are none."""
        return self.folded(cls, stream, verify_stream(self._events.keyring, stream, records))

    def folded(self, cls: type[A], stream: UUID, verified: Sequence[VerifiedRecord]) -> A | None:
        """The aggregate of type ``cls`` a whole stream's verified records make; None if none."""
        if not verified:
            return None
        aggregate = cls.folded(self._events.signed_mapper.decode_stream(verified))
        if not isinstance(aggregate, cls):
            raise IntegrityFailure(stream, 1, f"stream is not a {cls.__name__}")
        return aggregate

    def find(self, cls: type[A], stream: UUID) -> A | None:
        """The aggregate of ``stream``, verified and of type ``cls``; None when it has none."""
        return self.aggregate(cls, stream, self._events.recorder.select_events(stream))

    def get_one(self, cls: type[A], stream: UUID, what: str) -> A:
        """As `find`; `NotFoundError` naming ``what`` when the stream has no record."""
        aggregate = self.find(cls, stream)
        if aggregate is None:
            raise NotFoundError(f"no {what}")
        return aggregate

    def get_many(self, cls: type[A], streams: Sequence[UUID]) -> dict[UUID, A | None]:
        """`find` for several streams, read in one round trip."""
        read = self.read(streams)
        return {stream: self.aggregate(cls, stream, read[stream]) for stream in streams}
