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
from domain.key_check import KeyCheck
from infrastructure.storage.keys.keyring import Keyring
from infrastructure.storage.records.signed_record import VerifiedRecord, sign_record, verify_record

ENVELOPE_FIELDS = frozenset({"originator_id", "originator_version"})


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
