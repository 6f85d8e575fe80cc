"""Shared fixtures. The PostgreSQL harness logic lives in ``postgres_server.py``."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from support.postgres_server import (
    UNAVAILABLE,
    PostgresServer,
    describe_plan,
    fresh_database,
    made_databases,
    provide_postgres,
)

# Stores, ledgers and raw table access for storage tests (SQLite and PostgreSQL); the HTTP client.
pytest_plugins = [
    "support.store_copies",
    "support.ledger_fixtures",
    "support.api_support",
    "support.hand_written_runs",
    "support.go_note_verifier",
]


def pytest_report_header(config: pytest.Config) -> str:
    return describe_plan()


# --- PostgreSQL ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's PostgreSQL server; tests that need it skip (fail in CI) when there is none."""
    with provide_postgres() as server:
        if server is None:
            pytest.skip(UNAVAILABLE)
        yield server


@pytest.fixture
def make_postgres_database(postgres_server: PostgresServer) -> Iterator[Callable[[], str]]:
    """Call it for a new, empty database URL; every database it made is dropped after the test."""
    yield from made_databases(postgres_server, lambda name: fresh_database(postgres_server, name))


@pytest.fixture
def postgres_url(make_postgres_database: Callable[[], str]) -> str:
    """A fresh, empty PostgreSQL database for this test only."""
    return make_postgres_database()
