"""Events stored as an older version of the ledger wrote them: bodies of older event versions,
signed and stored below the aggregates (upcasting, and stores written before a change)."""

from __future__ import annotations

from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import get_topic

from domain.canonical import canonical_json
from domain.determinism import DeterministicClock
from infrastructure.application.ledger import Ledger
from infrastructure.storage.records.signed_record import sign_record
from support.ledger_fixtures import store_of

Bodies = list[tuple[type, dict[str, object]]]


def store_as_written_then(
    ledger: Ledger, stream: UUID, clock: DeterministicClock, bodies: Bodies
) -> None:
    """Sign and store events of ``stream`` as an older version of the ledger wrote them."""
    stored = []
    for version, (kind, body) in enumerate(bodies, start=1):
        topic = get_topic(kind)
        fields = canonical_json({**body, "timestamp": clock.iso(version)})
        state = sign_record(store_of(ledger).keyring, stream, version, topic, fields)
        stored.append(StoredEvent(stream, version, topic, state))
    store_of(ledger).recorder.insert_events(stored)
