"""Opening a PostgreSQL store fails within seconds, in the server's own words.

eventsourcing's connection pool connects in the background and retries; a wrong host, port,
database or password only surfaced after 30 s as "couldn't get a connection after 30.00 sec",
with the reason lost. Before the pool is made, one direct connection with libpq's
``connect_timeout`` (``MACE_CONNECT_TIMEOUT``) says whether the server takes this user for this
database, and if not, why: the message names host, port and database, never the password.
"""

from __future__ import annotations

from typing import Final

import psycopg
from eventsourcing.persistence import OperationalError

from infrastructure.storage.settings import PostgresStore, Store

READ_ONLY_OPTIONS: Final = "-c default_transaction_read_only=on"
"""libpq ``options`` of a read store's sessions: every transaction read-only, so the server
refuses a write (`ReadOnlyPostgresFactory`; a hot standby refuses it anyway)."""


class StoreUnreachable(OperationalError):
    """The store's server could not be reached or refused the connection (store unavailable)."""


def connect_postgres(
    store: PostgresStore, connect_timeout: int | None = None, application_name: str = ""
) -> psycopg.Connection[tuple[object, ...]]:
    """A connection of its own to the store's database, in autocommit mode (read-only for a
    read store); the server shows ``application_name`` for it (``pg_stat_activity``)."""
    return psycopg.connect(
        host=store.host,
        port=store.port,
        user=store.user,
        password=store.password,
        dbname=store.dbname,
        autocommit=True,
        connect_timeout=connect_timeout or store.connect_timeout,
        application_name=application_name,
        options=READ_ONLY_OPTIONS if store.read_only else None,
    )


def check_reachable(store: Store, timeout: int) -> None:
    """Connect once to a PostgreSQL store (a SQLite file needs no server)."""
    if not isinstance(store, PostgresStore):
        return
    try:
        connect_postgres(store, timeout).close()
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())  # libpq's message runs over several lines
        # A read store is named as such: the user sees which of the two settings to fix.
        where = f"{store.describe()} ({store.setting})" if store.read_only else store.describe()
        msg = f"cannot connect to {where}: {reason}"
        raise StoreUnreachable(msg) from None
