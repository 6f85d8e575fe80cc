"""eventsourcing's PostgreSQL wiring, with a connection pool that says "store unavailable" in time.

With the server gone, eventsourcing's pool kept a request waiting far past any client's patience:
each wait for a connection lasted the pool's 30 s default, and the recorders' ``@retry(...,
max_attempts=10)`` (meant for a connection dropped mid-use) repeated it, so ``/readyz`` and every
store route hung for minutes. `LedgerConnectionPool` bounds that:

- a request waits at most ``MACE_CONNECT_TIMEOUT`` for a connection, then fails with
  `StoreOutage`, a `PersistenceError` that is no ``OperationalError``: the recorders' retries do
  not repeat a wait that already lasted the whole timeout, and the error table answers it 503
  ``STORE_UNAVAILABLE`` (exit 1), naming the last reason a connection attempt failed;
- each connection attempt itself gives up after ``MACE_CONNECT_TIMEOUT`` (libpq's
  ``connect_timeout``), so a host that drops packets holds no pool worker for minutes;
- a connection that comes back broken (the server restarted or went away) empties the pool of its
  idle ones, which are dead as well, instead of handing each out to fail in turn;
- the pool gives up reconnecting a slot after a few seconds (`RECONNECT_SECONDS`) instead of five
  minutes with doubling pauses (1, 2, 4 ... 128 s): the next request grows the pool again at
  once, so the service recovers within seconds of the server's return, without a restart.

Reads in a transaction (eventsourcing's ``transaction(commit=False)``, the read models' and the
checkpoint tables' reads) are ended by a ``COMMIT`` of a ``READ ONLY`` transaction, not by the
``ROLLBACK`` eventsourcing ends them with: psycopg forgets every statement it prepared on the
connection after a rollback and sends ``DEALLOCATE ALL``, so each read made the next ones parse
their statements again (`LedgerPostgresDatastore`). A read that fails is still rolled back.

`LedgerPostgresFactory` is the factory ``PostgresStore.eventsourcing_env`` names for a store.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import psycopg
from eventsourcing.persistence import PersistenceError
from eventsourcing.postgres import ConnectionPool, PostgresDatastore, PostgresFactory
from eventsourcing.utils import Environment, EnvType
from psycopg.sql import SQL
from psycopg_pool import PoolTimeout

RECONNECT_SECONDS: Final = 3.0
"""How long the pool keeps reconnecting one slot in the background (attempts 1 s and 2 s apart)
before it leaves the slot for the next request to grow again."""


_BEGIN_READ_ONLY: Final = SQL("BEGIN READ ONLY")
_COMMIT: Final = SQL("COMMIT")


class StoreOutage(PersistenceError):
    """No connection to the store's server within the connect timeout (store unavailable)."""


class LedgerConnectionPool(ConnectionPool[Any]):
    def __init__(self, where: str, **options: Any) -> None:
        super().__init__(**options)
        self.where = where
        # Why the last connection attempt failed (None once one succeeded): the reason a request
        # that found no connection is told.
        self.last_failure: str | None = None

    def _connect(self, timeout: float | None = None) -> Any:
        try:
            connection = super()._connect(timeout)
        except psycopg.Error as exc:
            self.last_failure = " ".join(str(exc).split())  # libpq's runs over several lines
            raise
        self.last_failure = None
        return connection

    def getconn(self, timeout: float | None = None) -> Any:
        try:
            return super().getconn(timeout)
        except PoolTimeout:
            reason = self.last_failure or "every connection is in use"
            msg = (
                f"cannot connect to {self.where}: no connection within {self.timeout:g} s"
                f" (MACE_CONNECT_TIMEOUT): {reason}"
            )
            raise StoreOutage(msg) from None

    def putconn(self, conn: Any) -> None:
        broken = conn.broken or conn.closed
        super().putconn(conn)
        if broken and not self.closed:
            self.drain()


class LedgerPostgresDatastore(PostgresDatastore):
    @contextmanager
    def transaction(self, *, commit: bool = False) -> Iterator[Any]:
        """A transaction, as eventsourcing's; one that only reads (``commit`` False) is begun
        ``READ ONLY`` (the server refuses a write in it) and committed: a read-only transaction's
        commit writes nothing, and keeps the connection's prepared statements, which psycopg
        deallocates after every rollback. A read that raises is rolled back."""
        if commit:
            with super().transaction(commit=True) as cursor:
                yield cursor
            return
        with self.get_connection() as conn, conn.cursor() as cursor:
            cursor.execute(_BEGIN_READ_ONLY)
            try:
                yield cursor
            except BaseException:
                if not conn.closed:
                    conn.rollback()
                raise
            cursor.execute(_COMMIT)


class LedgerPostgresFactory(PostgresFactory):
    def __init__(self, env: Environment | EnvType | None) -> None:
        super().__init__(env)
        datastore = self.datastore
        # eventsourcing makes its datastore of its own class: the same object, read-only
        # transactions committed (`LedgerPostgresDatastore`; it adds no state).
        datastore.__class__ = LedgerPostgresDatastore
        given = datastore.pool
        # eventsourcing builds its pool in the datastore's constructor and offers no class to
        # swap: the same pool, made again (not opened yet, no connection made) as ours.
        kwargs = given.kwargs
        assert isinstance(kwargs, dict)
        datastore.pool = LedgerConnectionPool(
            f"postgresql://{kwargs['user']}@{kwargs['host']}:{kwargs['port']}/{kwargs['dbname']}",
            get_password_func=given.get_password_func,
            connection_class=given.connection_class,
            kwargs={**kwargs, "connect_timeout": max(round(given.timeout), 1)},
            min_size=given.min_size,
            max_size=given.max_size,
            open=False,
            configure=datastore.after_connect_func(),
            check=ConnectionPool.check_connection if datastore.pre_ping else None,
            timeout=given.timeout,
            max_waiting=given.max_waiting,
            max_lifetime=given.max_lifetime,
            reconnect_timeout=RECONNECT_SECONDS,
        )
