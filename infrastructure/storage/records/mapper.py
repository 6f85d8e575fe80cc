"""The one mapper: pydantic events <-> signed canonical JSON records.

Writing: ``model_dump(mode="json")`` without the id and version (they are columns, and bound by
the MAC), plus ``class_version``, through the canonical serializer (a field whose canonical
bytes the event kept, `DomainEvent.kept_fields`, as those bytes), then signed by the active key
(a key check by the key it names). Reading: verify
first, then decode, upcast (eventsourcing's ``upcast_vN_vN+1`` convention) and validate.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, cast
from uuid import UUID

import orjson
from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import Mapper, StoredEvent, Transcoder
from eventsourcing.utils import get_topic, resolve_topic

from domain.aggregate import DomainEvent
from domain.canonical import canonical_json
from domain.job import Job, RecordedFact
from domain.key_check import KeyCheck
from infrastructure.storage.keys.keyring import Keyring
from infrastructure.storage.records.signed_record import VerifiedRecord, sign_record, verify_record

ENVELOPE_FIELDS = frozenset({"originator_id", "originator_version"})
_STARTED_TOPIC = get_topic(Job.Started)
_RECORDED_TOPIC = get_topic(Job.Recorded)
_RECORDED_FIELDS = frozenset(
    {"class_version", "timestamp", "sequence_index", "event_type", "event_id", "payload"}
)
"""The fields a `Job.Recorded` record's body holds as the mapper writes one."""


class CanonicalTranscoder(Transcoder):
    """Canonical JSON out, orjson in; no custom type tags (pydantic has already made JSON)."""

    def encode(self, obj: Any) -> bytes:
        return canonical_json(obj)

    def decode(self, data: bytes) -> Any:
        return orjson.loads(data)


class SignedMapper(Mapper[UUID]):
    def __init__(self, keyring: Keyring) -> None:
        super().__init__(transcoder=CanonicalTranscoder())
        self.keyring = keyring
        self._signed = threading.local()

    def sign_ahead(self, events: Sequence[DomainEventProtocol[UUID]]) -> list[StoredEvent]:
        """The events signed now, as this thread's next save of them stores them, not signed
        again then: a job's seal digests the MACs of the very records stored with it."""
        stored = [self.to_stored_event(event) for event in events]
        self._signed.ahead = {id(e): (e, s) for e, s in zip(events, stored, strict=True)}
        return stored

    def to_stored_event(self, domain_event: DomainEventProtocol[UUID]) -> StoredEvent:
        ahead: dict[int, tuple[object, StoredEvent]] = getattr(self._signed, "ahead", {})
        signed = ahead.pop(id(domain_event), None)
        # The same object (an id is reused once its object is gone), and frozen: same bytes.
        if signed is not None and signed[0] is domain_event:
            return signed[1]
        if not isinstance(domain_event, DomainEvent):
            msg = f"MACE stores pydantic DomainEvents only, not {type(domain_event).__name__}"
            raise TypeError(msg)
        topic = get_topic(type(domain_event))
        # A field written once already (a job fact's payload) is stored as those bytes.
        kept = domain_event.kept_fields()
        state = domain_event.model_dump(mode="json", exclude={*ENVELOPE_FIELDS, *kept})
        state.update(kept)
        state["class_version"] = type(domain_event).class_version
        body = self.transcoder.encode(state)
        originator_id = domain_event.originator_id
        version = domain_event.originator_version
        # A key check proves the secret of the key it names, so that key signs it.
        key_id = domain_event.key_id if isinstance(domain_event, KeyCheck.Recorded) else None
        return StoredEvent(
            originator_id=originator_id,
            originator_version=version,
            topic=topic,
            state=sign_record(self.keyring, originator_id, version, topic, body, key_id),
        )

    def to_domain_event(self, stored_event: StoredEvent) -> DomainEventProtocol[UUID]:
        return self.decode(verify_record(self.keyring, stored_event))

    def decode_stream(self, records: Sequence[VerifiedRecord]) -> list[object]:
        """A whole stream's verified records decoded, in order, for its aggregate's ``folded``.

        Each as `decode` makes it, but in a job's stream (it starts with `Job.Started`) the
        recorded facts that follow its start, the last of them left out: each is read straight
        from its body as the `RecordedFact` `Job.folded` makes of it, when the body is a
        `Job.Recorded` of the current class version in the very form the ledger writes one
        (`_fact`): its MAC held, so it is the form made from an event validated when it was
        recorded, and validating it again as an event that `Job.folded` only takes four fields
        of was most of the cost of reading a job. Any other form is decoded as an event."""
        if not records or records[0].stored.topic != _STARTED_TOPIC:
            return [self.decode(record) for record in records]
        run_ends = next(
            (n for n in range(1, len(records)) if records[n].stored.topic != _RECORDED_TOPIC),
            len(records),
        )
        # The run's last fact is decoded as its event: the job takes its version and time.
        facts = [self._fact(record) or self.decode(record) for record in records[1 : run_ends - 1]]
        return [
            self.decode(records[0]),
            *facts,
            *(self.decode(record) for record in records[max(run_ends - 1, 1) :]),
        ]

    def _fact(self, record: VerifiedRecord) -> RecordedFact | None:
        """The fact a `Job.Recorded` record holds, when its body has exactly the fields of the
        current class version, each of the type the ledger writes; else None."""
        state = self.transcoder.decode(record.body)
        if (
            not isinstance(state, dict)
            or state.keys() != _RECORDED_FIELDS
            or state["class_version"] != Job.Recorded.class_version
        ):
            return None
        index, kind, event_id = state["sequence_index"], state["event_type"], state["event_id"]
        payload = state["payload"]
        if (
            type(index) is int
            and type(kind) is str
            and type(event_id) is str
            and type(payload) is dict
            and type(state["timestamp"]) is str
        ):
            return RecordedFact(index, kind, event_id, payload)
        return None

    def decode(self, record: VerifiedRecord) -> DomainEventProtocol[UUID]:
        """Decode a record whose MAC has already been verified."""
        stored = record.stored
        cls = resolve_topic(stored.topic)
        state: dict[str, Any] = self.transcoder.decode(record.body)
        from_version = state.pop("class_version", 1)
        while from_version < cls.class_version:
            getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(state)
            from_version += 1
        state["originator_id"] = stored.originator_id
        state["originator_version"] = stored.originator_version
        return cast(DomainEventProtocol[UUID], cls.model_validate(state))
