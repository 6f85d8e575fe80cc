"""Whether the store can take a write now, asked without writing (the readiness check).

A store that answers reads may still refuse every write: a PostgreSQL session that is read-only
(``default_transaction_read_only`` on the database or the role) or a server that is a standby (in
recovery); a SQLite file, its ``-wal`` or ``-shm`` file or its folder that this process may not
write; a disk with no room left. `write_refusal` names which, in one line, or says None.

Nothing is written to find out: a probe write would add to the ledger (or to a table beside it)
on every readiness check. So a full disk is seen only where the disk is ours to look at: the
SQLite file's filesystem, with less than `MIN_FREE_BYTES` free. A PostgreSQL server's disk is the
server's: a write it cannot extend its files for fails (503 ``STORE_UNAVAILABLE``) and its own
monitoring must say so; its read-only states are seen here.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Final

from infrastructure.storage.settings import PostgresStore, SQLiteStore, Store

MIN_FREE_BYTES: Final = 16 << 20
"""Below this much free space on a SQLite store's filesystem, the store takes no more writes:
room for the largest write one request may carry (``MACE_MAX_BODY_BYTES``, 1 MiB by default) a
few times over, as the write-ahead log holds it before a checkpoint copies it into the file."""

_READ_ONLY: Final = (
    "SELECT pg_is_in_recovery() AS standby, current_setting('transaction_read_only') AS read_only"
)


def write_refusal(location: Store, datastore: Any) -> str | None:
    """Why the store cannot take a write now (one line), or None. ``datastore``: the
    PostgreSQL store's pooled connections (eventsourcing's ``PostgresDatastore``)."""
    if isinstance(location, SQLiteStore):
        return _sqlite_refusal(location)
    if isinstance(location, PostgresStore):
        return _postgres_refusal(location, datastore)
    return None


def _postgres_refusal(location: PostgresStore, datastore: Any) -> str | None:
    with datastore.get_connection() as conn, conn.cursor() as cursor:
        cursor.execute(_READ_ONLY)
        row = cursor.fetchone()
    if row["standby"]:
        return f"{location.describe()} is a standby (in recovery): it refuses writes"
    if row["read_only"] == "on":
        return (
            f"{location.describe()} opens read-only sessions (default_transaction_read_only):"
            " it refuses writes"
        )
    return None


def _sqlite_refusal(location: SQLiteStore) -> str | None:
    path = location.path
    folder = path.parent
    # The folder too: SQLite makes the -wal and -shm files beside the store, and removes them.
    for where in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if where.exists() and not os.access(where, os.W_OK):
            return f"{where} is read-only: the store cannot take writes"
    if not os.access(folder, os.W_OK):
        return f"the folder {folder} is read-only: the store cannot take writes"
    free = shutil.disk_usage(folder).free
    if free < MIN_FREE_BYTES:
        return (
            f"the disk holding {path} has {free} bytes free (at least {MIN_FREE_BYTES} needed):"
            " the store cannot take writes"
        )
    return None
