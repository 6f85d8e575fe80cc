"""The ledger's signed records as they are stored, for what moves them whole: a bundle exports a
job's records with their envelopes, reads them back elsewhere, and imports them into another
store, byte for byte. Every record read here is verified (versions, MACs, seal) before it is
handed out; the envelope (``mace1.<key id>.<mac>.<body>``) is parsed by the one parser in
`infrastructure.storage.records.signed_record`, never by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from infrastructure.storage.keys.keyring import Keyring, load_keyring
from infrastructure.storage.records.integrity import verify_stream
from infrastructure.storage.records.signed_record import (
    Envelope,
    mac_message,
    parse_envelope,
    unverified_body,
    with_body,
)
from infrastructure.storage.settings import Settings
from infrastructure.storage.store import LedgerStore

__all__ = [
    "Envelope",
    "Keyring",
    "RecordService",
    "configured_keyring",
    "mac_message",
    "parse_envelope",
    "unverified_body",
    "verify_stream",
    "with_body",
]

T = TypeVar("T")


def configured_keyring(settings: Settings) -> Keyring:
    """The keyring the settings name, to read records signed elsewhere; nothing is made."""
    return load_keyring(settings, create=False)


class RecordService:
    def __init__(self, store: LedgerStore) -> None:
        self._store = store

    @property
    def keyring(self) -> Keyring:
        return self._store.keyring

    def verified(self, stream: UUID) -> list[StoredEvent]:
        """Every stored record of ``stream``, verified, as stored (not decoded)."""
        return [record.stored for record in self._store.verifying_store.read_verified(stream)]

    def decoded(self, stream: UUID) -> Iterator[object]:
        """Every event of ``stream``, each verified before it is decoded."""
        return iter(self._store.verifying_store.get(stream))

    def verified_events(self, stream: UUID) -> list[tuple[StoredEvent, object]]:
        """Every stored record of ``stream``, verified, with the event it holds."""
        decode = self._store.verifying_store.signed_mapper.decode
        return [
            (record.stored, decode(record))
            for record in self._store.verifying_store.read_verified(stream)
        ]

    def event_of(self, record: StoredEvent) -> object:
        """The event a record holds (one from elsewhere, a bundle's), verified before it is
        decoded."""
        return self._store.mapper.to_domain_event(record)

    def exists(self, stream: UUID) -> bool:
        """Whether any record of ``stream`` is stored."""
        return self._store.stream_exists(stream)

    def stored(self, stream: UUID) -> Sequence[StoredEvent]:
        """The records of ``stream`` as stored, to compare with records from elsewhere."""
        return self._store.recorder.select_events(stream)

    def insert(self, records: Sequence[StoredEvent]) -> None:
        """Store records signed elsewhere as they are, in one transaction."""
        self._store.insert_records(records)

    def racing(self, attempt: Callable[[], T], what: str) -> T:
        """Run ``attempt`` again whenever its write lost a race (`LedgerStore.racing`)."""
        return self._store.racing(attempt, what)
