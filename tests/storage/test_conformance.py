"""eventsourcing's shipped conformance suites, run against persistence as MACE configures it.

The recorders and the example application are built from the environment that our settings
derive from ``MACE_STORE`` (the same mapping the ledger uses), on a fresh SQLite file and a fresh
PostgreSQL database per test. The ledger stores through an application recorder, so those are
the recorder suites that apply; tracking and process recorders are not used by MACE.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import eventsourcing.tests.application as shipped_application
import eventsourcing.tests.persistence as shipped_persistence
import pytest
from eventsourcing.persistence import ApplicationRecorder, InfrastructureFactory
from eventsourcing.utils import Environment

from infrastructure.storage.settings import Settings


def configured_env(store_url: str) -> dict[str, str]:
    return Settings(store=store_url).parsed_store().eventsourcing_env()


class OnConfiguredStore:
    factory: InfrastructureFactory

    def open_factory(self, store_url: str) -> Iterator[None]:
        self.factory = InfrastructureFactory.construct(
            Environment("Ledger", configured_env(store_url))
        )
        threads_before = set(threading.enumerate())
        yield
        # Some shipped tests signal their reader threads to stop but do not join them; closing
        # the datastore under a reader still inside sqlite3 crashes the interpreter. (Daemon
        # threads are the connection pool's own workers, which close() stops.)
        for thread in set(threading.enumerate()) - threads_before:
            if thread.daemon:
                continue
            thread.join(timeout=60)
            assert not thread.is_alive(), f"{thread.name} outlived its test"
        self.factory.close()

    def create_recorder(self) -> ApplicationRecorder:
        return self.factory.application_recorder()


class OnSQLite(OnConfiguredStore):
    @pytest.fixture(autouse=True)
    def _configured_store(self, tmp_path: Path) -> Iterator[None]:
        yield from self.open_factory(f"sqlite:///{tmp_path}/conformance.db")


class OnPostgres(OnConfiguredStore):
    @pytest.fixture(autouse=True)
    def _configured_store(self, postgres_url: str) -> Iterator[None]:
        yield from self.open_factory(postgres_url)


class TestSQLiteApplicationRecorder(OnSQLite, shipped_persistence.ApplicationRecorderTestCase):
    pass


class TestSQLiteNonInterleavingNotificationIDs(
    OnSQLite, shipped_persistence.NonInterleavingNotificationIDsBaseCase
):
    pass


class TestPostgresApplicationRecorder(OnPostgres, shipped_persistence.ApplicationRecorderTestCase):
    pass


# eventsourcing's NonInterleavingNotificationIDsBaseCase holds on SQLite only: PostgreSQL saves of
# streams they do not share commit side by side, and their ids may interleave. What readers rely
# on instead, a settled horizon no later commit falls below, is `test_parallel_writers`'s.


class TestExampleApplicationOnSQLite(shipped_application.ExampleApplicationTestCase):
    expected_factory_topic = "eventsourcing.sqlite:SQLiteFactory"

    @pytest.fixture(autouse=True)
    def _configured_environment(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        for key, value in configured_env(f"sqlite:///{tmp_path}/example.db").items():
            monkeypatch.setenv(key, value)


class TestExampleApplicationOnPostgres(shipped_application.ExampleApplicationTestCase):
    # eventsourcing's, with the ledger's connection pool (`postgres_pool`).
    expected_factory_topic = "infrastructure.storage.backends.postgres_pool:LedgerPostgresFactory"

    @pytest.fixture(autouse=True)
    def _configured_environment(self, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        for key, value in configured_env(postgres_url).items():
            monkeypatch.setenv(key, value)
