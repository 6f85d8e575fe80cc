"""The ledger: the one composition root, where the store and every use case are built once.

`Ledger.open` opens the store (`LedgerStore`: the eventsourcing Application, plumbing only) and
hands it, and the peers each needs, to every use case; callers reach them as ``ledger.jobs``,
``ledger.replays``, ... The ledger itself does one more thing: a ledger that saved anything
writes a checkpoint when it is closed (`checkpoint_on_close`), so a command leaves the store
fully checkpointed; the HTTP service turns that off and runs a notary instead.

`Ledger.open_for_reading` opens the ledger that read-only work reads (``mace verify``, the
comparison ``mace rebuild`` makes on a read store, the service's reading routes, ``mace audit``):
``MACE_READ_STORE`` when it is set, a replica or copy opened so that nothing is written to it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import TracebackType

from eventsourcing.persistence import StoredEvent

from infrastructure.application.audit import AuditService
from infrastructure.application.checkpoints import CheckpointService
from infrastructure.application.fork import ForkService
from infrastructure.application.governance import GovernanceService
from infrastructure.application.jobs import JobService
from infrastructure.application.limits import InputLimits
from infrastructure.application.memories import MemoryService
from infrastructure.application.personal_data import PersonalDataReads
from infrastructure.application.policy import PolicyService
from infrastructure.application.privacy_rules import PrivacyRules
from infrastructure.application.read_model_sync import ReadModels
from infrastructure.application.receipts import ReceiptService
from infrastructure.application.records import RecordService
from infrastructure.application.replay_harness import LedgerRecordings
from infrastructure.application.replays import ReplayService
from infrastructure.application.run_imports import RunImports
from infrastructure.application.run_uploads import RunUploads
from infrastructure.application.runs import RunService
from infrastructure.application.sem import SemService
from infrastructure.application.snapshots import SnapshotService
from infrastructure.application.store_status import StoreStatus
from infrastructure.application.trace_imports import TraceImports
from infrastructure.application.trace_intake import TraceIntake
from infrastructure.application.whatif import WhatIfService
from infrastructure.application.whatif_as_of import AsOfService
from infrastructure.application.whatif_batch import WhatIfBatchService
from infrastructure.storage.keys.keyring import Keyring
from infrastructure.storage.settings import Settings, Store
from infrastructure.storage.store import LedgerStore

logger = logging.getLogger("mace.checkpoints")


class Ledger:
    def __init__(
        self,
        store: LedgerStore,
        *,
        checkpoint_on_close: bool = True,
        leases: Store | None = None,
        limits: InputLimits | None = None,
    ) -> None:
        """``leases``: where replays hold their leases, if not in ``store``; ``limits``: how much
        a way in may hand it (by default, as the environment's settings say)."""
        # The store stays inside: callers reach it only through the use cases below.
        self._store = store
        self.checkpoint_on_close = checkpoint_on_close
        self.limits = limits or InputLimits.of(Settings())
        self.status = StoreStatus(store)
        self.read_models = ReadModels(store)
        self.checkpoints = CheckpointService(store, self.read_models)
        self.records = RecordService(store)
        self.snapshots = SnapshotService(store)
        self.sem = SemService(store, self.snapshots)
        self.jobs = JobService(store, self.snapshots, self.sem)
        self.privacy = PrivacyRules(self.snapshots)
        self.policy = PolicyService(store)
        self.runs = RunService(self.jobs, self.snapshots, self.privacy, self.policy, self.limits)
        self.run_imports = RunImports(store, self.runs, self.jobs)
        self.trace_imports = TraceImports(self.run_imports, self.limits)
        self.trace_intake = TraceIntake(store, self.trace_imports, self.privacy)
        self.run_uploads = RunUploads(store, self.runs, self.jobs)
        self.personal_data = PersonalDataReads(store, self.jobs, self.privacy)
        self.governance = GovernanceService(store, self.jobs, leases)
        self.memories = MemoryService(store)
        self.replays = ReplayService(
            store, self.jobs, self.snapshots, self.governance, self.policy, self.memories
        )
        self.recordings = LedgerRecordings(self.replays, self.personal_data)
        self.audits = AuditService(store, self.jobs, self.replays)
        self.whatif = WhatIfService(store, self.replays)
        self.whatif_batches = WhatIfBatchService(store, self.whatif)
        self.whatif_as_of = AsOfService(store, self.whatif, self.checkpoints)
        self.forks = ForkService(
            store, self.jobs, self.snapshots, self.sem, self.replays, self.whatif
        )
        self.receipts = ReceiptService(store, self.memories, self.policy, self.read_models)

    @classmethod
    def open(
        cls,
        settings: Settings | None = None,
        *,
        create: bool = True,
        checkpoint_on_close: bool = True,
    ) -> Ledger:
        """Open the ledger the settings name; a writer sets up a new store's tables.

        ``create=False`` (readers) neither makes a store nor its tables: one not set up is refused.
        """
        settings = settings or Settings()
        store = LedgerStore.open(settings, create=create)
        return cls(store, checkpoint_on_close=checkpoint_on_close, limits=InputLimits.of(settings))

    def copy_at(self, location: Store) -> Ledger:
        """A ledger over ``location``, a copy of this one's store made by the caller, opened with
        the same keys; it never checkpoints (a scratch copy is thrown away)."""
        store = self._store
        copy = LedgerStore(location, store.keyring, store.checkpoint_key)
        return Ledger(copy, checkpoint_on_close=False)

    @classmethod
    def in_memory(cls, keyring: Keyring, records: Sequence[StoredEvent]) -> Ledger:
        """A ledger over exactly ``records`` (a bundle's, verified with ``keyring``), held in
        memory and gone when it is closed; it never checkpoints."""
        return cls(LedgerStore.in_memory(keyring, records), checkpoint_on_close=False)

    @classmethod
    def open_for_reading(cls, settings: Settings | None = None) -> Ledger:
        """The ledger read-only work reads: ``MACE_READ_STORE`` opened read-only when it is set
        (`LedgerStore.open_read_store`), else ``MACE_STORE`` as every reader opens it.

        A read store lags its primary: what is read there is the ledger up to the read store's
        head. Its replay leases are the primary's, where replays run and hold them; it never
        checkpoints (it writes nothing).
        """
        settings = settings or Settings()
        if settings.parsed_read_store() is None:
            return cls.open(settings, create=False)
        store = LedgerStore.open_read_store(settings)
        return cls(store, checkpoint_on_close=False, leases=settings.parsed_store())

    def close(self) -> None:
        """Checkpoint what this ledger saved (if it is to), then close the store."""
        try:
            self._checkpoint_saves()
        finally:
            self.governance.leases.close()
            self._store.close()

    def _checkpoint_saves(self) -> None:
        store = self._store
        if not (self.checkpoint_on_close and store.wrote and store.checkpoints is not None):
            return
        try:
            self.checkpoints.write()
        except Exception as failure:
            # What was saved stays saved and the command's own outcome stands; the failure
            # (a store gone, an event tampered with since it was saved) is said, and the next
            # writer or `mace verify --all` meets it again.
            logger.warning("no checkpoint written: %s", failure)

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
