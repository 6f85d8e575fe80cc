"""How the store stands, for the people who run it: where it is, how far its log goes, which
tables it has, and whether the configured keys are the ones it was signed with.

`mace init`, the service's readiness check, the notes a command prints when it read
``MACE_READ_STORE`` and the tools (bench, demo) read these here, never from the store itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from infrastructure.storage.backends.connection import connect_postgres
from infrastructure.storage.backends.io_tally import IoTally, WireTally, counting_wire
from infrastructure.storage.backends.writability import write_refusal
from infrastructure.storage.checkpoints.chain import CheckpointKeyMismatch
from infrastructure.storage.records.key_checks import KeyMismatch, KeyStatus
from infrastructure.storage.settings import SQLiteStore, Store
from infrastructure.storage.store import LedgerStore

# What the raw baselines of ``mace bench`` reach the store with, beside the ledger.
__all__ = [
    "IoTally",
    "KeyStanding",
    "StoreStatus",
    "WireTally",
    "connect_postgres",
    "counting_wire",
]


@dataclass(frozen=True)
class KeyStanding:
    """Each configured key id's standing against the store, and a line for each it contradicts."""

    statuses: dict[str, str]
    mismatches: list[str]


class StoreStatus:
    def __init__(self, store: LedgerStore) -> None:
        self._store = store

    @property
    def where(self) -> str:
        """The store as messages name it (never its password)."""
        return self._store.location.describe()

    @property
    def location(self) -> Store:
        """Where the store is, as the settings parsed it."""
        return self._store.location

    @property
    def events_table(self) -> str:
        """The name of the table the events are stored in."""
        table = getattr(self._store.recorder, "events_table_name", "")
        assert isinstance(table, str)
        return table

    @property
    def read_only(self) -> bool:
        """Whether this is a read store (``MACE_READ_STORE``), which nothing is written to."""
        return self._store.location.read_only

    @property
    def sqlite(self) -> SQLiteStore | None:
        """The SQLite file the store is, or None for PostgreSQL (or a bundle's ledger)."""
        location = self._store.location
        return location if isinstance(location, SQLiteStore) else None

    @property
    def active_key_id(self) -> str:
        return self._store.keyring.active_key_id

    @property
    def key_ids(self) -> list[str]:
        return list(self._store.keyring.key_ids)

    @property
    def io(self) -> IoTally:
        """The rows this process read from and wrote to the events table."""
        return self._store.io

    def head(self) -> int:
        """The log's head: the highest notification id committed (0: none)."""
        return self._store.recorder.max_notification_id() or 0

    def write_refusal(self) -> str | None:
        """Why the store cannot take a write now (read-only, a standby, a full disk), asked
        without writing (`writability`); None: nothing found in the way."""
        return write_refusal(self._store.location, getattr(self._store.recorder, "datastore", None))

    def tables(self) -> list[str]:
        """The tables the store holds the ledger in (events, checkpoints, read models, ...)."""
        return list(self._store.schema.tables)

    def keys(self) -> KeyStanding:
        """Each key id's standing, looked up in the store, and the checkpoint key's (the newest
        checkpoint must name it); a mismatch is said, not raised."""
        statuses = self._store.key_checks.status()
        keyring = self._store.keyring
        mismatches = [
            str(KeyMismatch(keyring, key_id))
            for key_id, status in sorted(statuses.items())
            if status is KeyStatus.MISMATCH
        ]
        checkpoints = self._store.checkpoints
        try:
            # The checkpoint's key id is read once its MAC holds: under keys the store confirms.
            if checkpoints is not None and not mismatches:
                checkpoints.prove_key()
        except CheckpointKeyMismatch as mismatch:
            mismatches.append(str(mismatch))
        return KeyStanding(
            {key_id: status.value for key_id, status in sorted(statuses.items())}, mismatches
        )
