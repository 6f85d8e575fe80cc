"""A store's tables are set up once, by ``mace init`` or the first writer, never by a reader.

eventsourcing runs its DDL (``CREATE TABLE/TYPE/INDEX IF NOT EXISTS``, ``CREATE OR REPLACE
FUNCTION``) whenever a recorder is made, so every process ran it at start, reads included, and on
PostgreSQL processes starting together failed with "tuple concurrently updated". The ledger turns
that off (``CREATE_TABLE=n``). A writer that finds tables missing creates them here, on PostgreSQL
under an advisory lock, so one process at a time does it and the others then find them made (on
SQLite the database file's own lock orders them); a reader that finds them missing says so and
changes nothing.
"""

from __future__ import annotations

from typing import Final

from eventsourcing.persistence import ApplicationRecorder, IntegrityError
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.sqlite import SQLiteApplicationRecorder

from domain.errors import NotFoundError
from infrastructure.storage.checkpoints.tables import TABLES as CHECKPOINT_TABLES
from infrastructure.storage.checkpoints.tables import CheckpointTables
from infrastructure.storage.read_models.tables import ReadModelView
from infrastructure.storage.settings import Store

SCHEMA_LOCK: Final = int.from_bytes(b"mace:ddl", "big", signed=True)
"""The PostgreSQL advisory lock key that writers setting up tables take in turn (per database)."""


class StoreNotSetUp(NotFoundError):
    """The store has no ledger tables yet: ``mace init`` (or any first write) sets them up."""


class StoreSchema:
    """The tables a ledger keeps its events and views in: which are missing, and making them.

    ``where``: the store, as messages name it. Made by `LedgerStore.schema`.
    """

    def __init__(self, recorder: ApplicationRecorder, view: ReadModelView, where: Store) -> None:
        assert isinstance(recorder, PostgresApplicationRecorder | SQLiteApplicationRecorder)
        self.recorder = recorder
        self.view = view
        self.where = where
        self.tables = (recorder.events_table_name, *CHECKPOINT_TABLES, *self.view.table_names())

    def missing(self) -> list[str]:
        """The tables not in the store, in set-up order."""
        present = self._present()
        return [table for table in self.tables if table not in present]

    def require(self) -> None:
        """For readers: refuse a store whose tables are not all there, changing nothing."""
        missing = self.missing()
        if missing:
            # A read store is a copy: setting it up would be writing to it, and a wrong copy.
            remedy = (
                f"point {self.where.setting} at a replica or copy of the ledger"
                if self.where.read_only
                else f"run 'mace init', or point {self.where.setting} at a ledger"
            )
            msg = (
                f"no ledger at {self.where.describe()}: its tables are not set up (missing"
                f" {', '.join(missing)}; {remedy})"
            )
            raise StoreNotSetUp(msg)
        self._register_types()

    def ensure(self) -> None:
        """For writers: create the missing tables, one process at a time."""
        if not self.missing():
            self._register_types()
            return
        datastore = self.recorder.datastore
        if isinstance(datastore, PostgresDatastore):
            with datastore.get_connection() as lock:
                lock.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
                try:
                    self._create_missing()
                finally:
                    lock.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK,))
        else:
            self._create_missing()

    def _create_missing(self) -> None:
        if self.missing():  # again: another writer may have made them while this one waited
            try:
                # The events table first: a set-up killed midway leaves the views missing, not it.
                self.recorder.create_table()
                CheckpointTables(self.recorder).create()
                self.view.create_table()
            except IntegrityError:
                # SQLite has no advisory lock: a writer setting up at the same moment recorded
                # the tracking table's version first, and this one's set-up rolled back.
                if self.missing():
                    raise
        self._register_types()

    def _present(self) -> set[str]:
        datastore = self.recorder.datastore
        if isinstance(datastore, PostgresDatastore):
            query = (
                "SELECT tablename FROM pg_catalog.pg_tables"
                " WHERE schemaname = %s AND tablename = ANY(%s)"
            )
            with datastore.transaction(commit=False) as curs:
                curs.execute(query, (datastore.schema, list(self.tables)))
                return {row["tablename"] for row in curs.fetchall()}
        with datastore.transaction(commit=False) as c:
            c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            return {row[0] for row in c.fetchall()}

    def _register_types(self) -> None:
        """PostgreSQL: the composite type inserts use, perhaps made since the recorder was."""
        datastore = self.recorder.datastore
        if isinstance(datastore, PostgresDatastore):
            datastore.register_type_adapters()
