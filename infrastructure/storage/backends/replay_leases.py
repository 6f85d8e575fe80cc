"""Replay leases: how a reader tells a replay still running from one abandoned, without a clock.

A replaying process takes a lease before its REPLAY_REQUEST is stored and holds it until the
attempt's REPLAY_RESULT is stored (or it gives up). The lease is a lock the operating system or
the database drops when its holder dies: on SQLite an exclusive ``flock`` on a file of its own in
``<database>-replay-leases/``, on PostgreSQL a session advisory lock (visible in ``pg_locks``
to every session of that database). Its name, 16 random hex digits, is written into the request.

So a request without a result whose lease is held is running; one whose lease nobody holds will
never get a result (its process was killed, lost the store or failed), unless the result was
stored between the two reads: the caller reads the record again to tell (see
`GovernanceService.unanswered_replays`). Asking is read-only on both stores.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from threading import Lock
from typing import Final

import psycopg

from infrastructure.storage.backends.connection import connect_postgres
from infrastructure.storage.settings import PostgresStore, SQLiteStore, Store

LEASE_PATTERN: Final = re.compile(r"^[0-9a-f]{16}$")
LEASE_APPLICATION: Final = "mace replay lease"
"""How a lease's connection is named to the server: an operator sees which sessions they are."""
KEPT_CONNECTIONS: Final = 4
"""Lease connections a process keeps open between replays (the HTTP service runs several)."""


def new_lease() -> str:
    """A lease name: 64 random bits (ops metadata, never a decision input)."""
    return secrets.token_hex(8)


class FileLeases:
    """SQLite: one file per lease beside the database, locked with ``flock`` while held."""

    def __init__(self, database: Path) -> None:
        self.directory = database.with_name(f"{database.name}-replay-leases")

    @contextmanager
    def hold(self) -> Iterator[str]:
        self.directory.mkdir(mode=0o755, exist_ok=True)
        while True:
            lease = new_lease()
            path = self.directory / lease
            try:
                descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
                break
            except FileExistsError:
                continue  # a dead holder's file drew the same 64 bits: draw again
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            yield lease
        finally:
            # Removed before it is unlocked: a reader never finds an unlocked file of a live lease.
            # A killed holder leaves its (unlocked, empty) file behind; it reads as not held.
            path.unlink(missing_ok=True)
            os.close(descriptor)

    def close(self) -> None:
        """Nothing to close: a lease's file is closed when its replay ends."""

    def held(self, leases: Iterable[str]) -> set[str]:
        return {lease for lease in leases if LEASE_PATTERN.fullmatch(lease) and self._held(lease)}

    def _held(self, lease: str) -> bool:
        try:
            descriptor = os.open(self.directory / lease, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(descriptor)  # also drops the shared lock, if it was granted
        return False


class AdvisoryLeases:
    """PostgreSQL: a session advisory lock on the lease's 64 bits, on a connection of its own.

    A lease's connection is kept for the next lease once the lock is given back (connecting
    was a tenth of a replay's time); one that cannot be unlocked, or fails, is closed instead,
    which unlocks it too."""

    HELD = (
        "SELECT classid::bigint, objid::bigint FROM pg_locks"
        " WHERE locktype = 'advisory' AND objsubid = 1 AND granted"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    )

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self._idle: list[psycopg.Connection[tuple[object, ...]]] = []
        self._idle_lock = Lock()

    @contextmanager
    def hold(self) -> Iterator[str]:
        connection, lease, key = self._locked()
        try:
            yield lease
        finally:
            self._give_back(connection, key)

    def close(self) -> None:
        """Close the connections kept for later leases (none of them holds one)."""
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _locked(self) -> tuple[psycopg.Connection[tuple[object, ...]], str, int]:
        """A connection holding a fresh lease: a kept one, or a new one if that one failed."""
        kept = self._kept()
        if kept is not None:
            try:
                return kept, *self._lock_on(kept)
            except psycopg.Error:
                kept.close()  # the server dropped it while it was kept: connect anew
        connection = connect_postgres(self.store, application_name=LEASE_APPLICATION)
        try:
            return connection, *self._lock_on(connection)
        except BaseException:
            connection.close()
            raise

    @staticmethod
    def _lock_on(connection: psycopg.Connection[tuple[object, ...]]) -> tuple[str, int]:
        while True:
            lease = new_lease()
            key = int.from_bytes(bytes.fromhex(lease), signed=True)
            row = connection.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if row is not None and row[0]:
                return lease, key
            # else another holder drew the same 64 bits: draw again

    def _kept(self) -> psycopg.Connection[tuple[object, ...]] | None:
        with self._idle_lock:
            return self._idle.pop() if self._idle else None

    def _give_back(self, connection: psycopg.Connection[tuple[object, ...]], key: int) -> None:
        try:
            row = connection.execute("SELECT pg_advisory_unlock(%s)", (key,)).fetchone()
        except psycopg.Error:
            row = None
        if row is None or not row[0]:
            connection.close()  # closing the session unlocks whatever it still holds
            return
        with self._idle_lock:
            if len(self._idle) < KEPT_CONNECTIONS:
                self._idle.append(connection)
                return
        connection.close()

    def held(self, leases: Iterable[str]) -> set[str]:
        wanted = {lease for lease in leases if LEASE_PATTERN.fullmatch(lease)}
        if not wanted:
            return set()
        with connect_postgres(self.store) as connection:
            rows = connection.execute(self.HELD).fetchall()
        # pg_locks shows a bigint key as its high half (classid) and low half (objid), unsigned.
        locked = {f"{high:08x}{low:08x}" for high, low in rows}
        return wanted & locked


def replay_leases(store: Store) -> FileLeases | AdvisoryLeases:
    """The store's leases: ``hold()`` a fresh one for a block; ``held(names)``, those still held."""
    if isinstance(store, SQLiteStore):
        return FileLeases(store.path)
    return AdvisoryLeases(store)
