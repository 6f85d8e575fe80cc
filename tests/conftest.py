"""Shared fixtures. The PostgreSQL harness logic lives in ``postgres_server.py``."""

from __future__ import annotations

import compileall
from collections.abc import Callable, Iterator
from pathlib import Path

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
# A plugin is registered (and its asserts rewritten) before any plugin that imports it.
pytest_plugins = [
    "support.store_copies",
    "support.ledger_fixtures",
    "support.hand_written_runs",
    "support.api_support",
    "support.go_note_verifier",
]


ROOT = Path(__file__).resolve().parents[1]
COMPILED = ("domain", "projections", "infrastructure", "clients/python")


def pytest_configure(config: pytest.Config) -> None:
    """The session's first process compiles the ledger's modules before any worker starts.

    The suite starts hundreds of interpreters (``mace`` commands, audit workers, the bench's
    writers, the service) that import the ledger from this tree: with its bytecode written once
    here, none compiles every module again (about 0.2 s of processor time each), which each did
    where ``PYTHONDONTWRITEBYTECODE`` keeps Python from writing it (CI). Up-to-date files are
    left as they are."""
    if hasattr(config, "workerinput"):  # an xdist worker: the controller compiled already
        return
    for folder in COMPILED:
        compileall.compile_dir(ROOT / folder, quiet=1, workers=0)


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
