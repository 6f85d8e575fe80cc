"""A SQLite store's file: refused before anything is written if it is not one, and switched to
write-ahead logging once, before any pool connects (a read store's file is only checked).

eventsourcing runs ``PRAGMA journal_mode=WAL`` on every connection it makes. On a new file that
switch needs the file to itself, and SQLite answers a second process (or thread) switching at the
same moment with "database is locked" at once, without waiting out the busy timeout: writers
setting up a fresh store together failed. Once the file is in WAL mode the pragma changes nothing
and takes no such lock, so the switch is made here, waiting for its turn, and the pool's own
pragma then finds it made.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from typing import Final

from eventsourcing.persistence import OperationalError

from domain.errors import NotFoundError
from infrastructure.storage.settings import SettingsError, SQLiteStore
from infrastructure.storage.write_retries import WRITE_RETRIES

LOCK_WAIT_SECONDS: Final = 5.0
"""How long to wait for the switch: eventsourcing's default SQLite lock timeout."""

HEADER: Final = b"SQLite format 3\x00"
"""The first bytes of every SQLite database file (an empty file is one too, not yet written)."""


def refuse_other_files(store: SQLiteStore) -> None:
    """MACE_STORE (or MACE_READ_STORE) naming a directory or a file that is not a SQLite
    database is a bad setting, refused before a keyring or key is made beside it."""
    path = store.path
    if path.is_dir():
        msg = f"{store.setting} {store.describe()!r} is a directory: name a database file in it"
        raise SettingsError(msg)
    if path.is_file():
        with path.open("rb") as file:
            header = file.read(len(HEADER))
        if header and header != HEADER:
            msg = f"{store.setting} {store.describe()!r} is not a SQLite database file"
            raise SettingsError(msg)


def require_write_ahead_log(store: SQLiteStore) -> None:
    """A read store's file must already be in WAL mode, as every ledger MACE writes is (and a
    copy of one, by file copy or the backup API): eventsourcing switches each connection it
    makes to WAL, which a read-only connection cannot do. Anything else (an empty file, a
    database MACE never wrote) is no ledger, said as such; nothing is written to find out."""
    try:
        connection = sqlite3.connect(f"{store.path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
        finally:
            connection.close()
    except sqlite3.Error as exc:  # the file cannot be opened or read: the store's fault
        raise OperationalError(f"{store.describe()}: {exc}") from None
    if str(mode).lower() != "wal":
        msg = (
            f"no ledger at {store.describe()}: a ledger MACE wrote is in write-ahead-log mode and"
            f" this file is not (point {store.setting} at a copy of the ledger)"
        )
        raise NotFoundError(msg)


def use_write_ahead_log(store: SQLiteStore, wait: float = LOCK_WAIT_SECONDS) -> None:
    """Put the store's file (made here if new) in WAL mode, retrying while another has it
    (the store's retry policy, its time budget ``wait``)."""
    what = f"{store.describe()} (switching it to write-ahead logging)"
    retries = replace(WRITE_RETRIES, seconds=wait).start(what)
    try:
        connection = sqlite3.connect(store.path, timeout=wait, isolation_level=None)
        try:
            while not _switched(connection):
                retries.lost()
        finally:
            connection.close()
    except sqlite3.Error as exc:  # the file cannot be opened or written: the store's fault
        raise OperationalError(f"{store.describe()}: {exc}") from None


def _switched(connection: sqlite3.Connection) -> bool:
    """Whether the switch was made now; False while another connection has the file."""
    try:
        connection.execute("PRAGMA journal_mode=WAL").fetchall()
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc):
            return False
        raise
    return True
