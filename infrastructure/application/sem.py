"""SEM use cases: each tenant's job-scoped semantic memory (`SemEntry`, its key scoped by tenant),
read and written from outside any job (``mace sem``), and read by the Stage-0 runtime."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from domain.governance import Actor
from domain.job import DEFAULT_TENANT, validate_tenant
from domain.sem import SemEntry, SemRecord, canonical_key
from domain.sensitive_data import refuse_sensitive
from infrastructure.application.limits import check_sem_key_length
from infrastructure.application.snapshots import SnapshotService
from infrastructure.storage.store import LedgerStore
from projections.redaction import shown_kept


class SemService:
    def __init__(self, store: LedgerStore, snapshots: SnapshotService) -> None:
        self.store = store
        self.snapshots = snapshots

    def entry(self, tenant: str, key: str) -> SemEntry | None:
        """The tenant's stored SEM entry under a canonical key."""
        return self.store.repository.find(SemEntry, SemEntry.id_in(tenant, key))

    def sem_events(self, tenant: str, key: str) -> list[SemEntry.Event]:
        """The tenant's entry under a canonical key as its stored events, verified, in version
        order (`replay_sem.SemVersions`)."""
        events = self.store.verifying_store.get(SemEntry.id_in(tenant, key))
        return [e for e in events if isinstance(e, SemEntry.Event)]

    def sem_positions(self, tenant: str, key: str) -> dict[int, int]:
        """Where each version of the tenant's entry stands in the ledger's log."""
        stream = SemEntry.id_in(tenant, key)
        return self.store.stream_positions([stream])[stream]

    def of(self, tenant: str) -> TenantSem:
        return TenantSem(self, tenant)

    def get(
        self,
        raw_key: str,
        snapshot_ids: dict[str, str] | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> tuple[str, SemRecord]:
        """S7: the tenant's record under a key, after S1-S4; a miss says so (S9)."""
        validate_tenant(tenant)
        check_sem_key_length(raw_key)
        key = canonical_key(raw_key, self.snapshots.stage0(snapshot_ids or {})[1].brainstate.sem)
        entry = self.entry(tenant, key)
        return key, (SemRecord(exists=False) if entry is None else entry.read())

    def shown(
        self,
        raw_key: str,
        reader: Actor | None,
        snapshot_ids: dict[str, str] | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> tuple[str, SemRecord]:
        """`get` as ``reader`` (None: anonymous) may see it: a value holding personal data (kept
        before writes refused it) in full only to an admin (`personal_data.shown_kept`)."""
        key, record = self.get(raw_key, snapshot_ids, tenant)
        if not record.exists:
            return key, record
        denied = self.snapshots.stage0(snapshot_ids or {})[1].privacy.deny_sem_attributes
        return key, replace(record, value=shown_kept(reader, key, record.value, denied))

    def put(
        self,
        raw_key: str,
        value: Any,
        snapshot_ids: dict[str, str] | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> tuple[str, SemRecord]:
        """S5/S8: store a tenant's fact from outside any job; the write is an event on the key."""
        validate_tenant(tenant)
        check_sem_key_length(raw_key)
        snapshots = self.snapshots.stage0(snapshot_ids or {})[1]
        key = canonical_key(raw_key, snapshots.brainstate.sem)
        snapshots.privacy.check_storable(key)
        # The same rules as a run's events: a secret's name anywhere, a value shaped like one.
        refuse_sensitive({"key": key, "value": value}, snapshots.privacy.deny_sem_attributes)

        def attempt() -> SemRecord:
            entry = self.entry(tenant, key)
            if entry is None:
                entry = SemEntry.first_write(tenant, key, value, "cli")
            else:
                entry.write(value, "cli")
            self.store.save(entry)
            return entry.read()

        return key, self.store.racing(attempt, f"SEM write to {key}")


@dataclass(frozen=True)
class TenantSem:
    """One tenant's SEM in the ledger, as the Stage-0 runtime reads it (`SemSource`)."""

    sem: SemService
    tenant: str

    def entry(self, key: str) -> SemEntry | None:
        return self.sem.entry(self.tenant, key)
