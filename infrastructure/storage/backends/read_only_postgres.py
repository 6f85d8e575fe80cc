"""eventsourcing's PostgreSQL wiring for a read store: every session it opens refuses writes.

A read store (``MACE_READ_STORE``) is a replica or a copy of the ledger; nothing the ledger does
may write to it. Code that only reads is what keeps it so; this makes the server say so too: each
pooled connection starts its sessions with ``default_transaction_read_only``, so a write that
slipped in fails ("cannot execute ... in a read-only transaction") instead of changing the copy.
`PostgresStore.eventsourcing_env` names this factory for a read store.
"""

from __future__ import annotations

from eventsourcing.utils import Environment, EnvType

from infrastructure.storage.backends.connection import READ_ONLY_OPTIONS
from infrastructure.storage.backends.postgres_pool import LedgerPostgresFactory


class ReadOnlyPostgresFactory(LedgerPostgresFactory):
    def __init__(self, env: Environment | EnvType | None) -> None:
        super().__init__(env)
        pool = self.datastore.pool
        # The pool connects lazily, on first use: every connection it makes gets the option.
        assert isinstance(pool.kwargs, dict)
        pool.kwargs = {**pool.kwargs, "options": READ_ONLY_OPTIONS}
