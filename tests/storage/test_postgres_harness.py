"""The PostgreSQL test harness gives a real, isolated server, and fails loudly in CI without one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from support.postgres_server import (
    ENV_URL,
    REQUIRED_IN_CI,
    Candidate,
    PostgresServer,
    choose_sources,
    drop_database,
    fresh_database,
    provide_postgres,
)


def no_docker() -> bool:
    return False


def docker_answers() -> bool:
    return True


def no_binaries() -> Path | None:
    return None


def binaries_at(path: Path) -> Callable[[], Path | None]:
    return lambda: path


def must_not_probe() -> bool:
    raise AssertionError("probed although the URL was given")


# --- with a real server -------------------------------------------------------------------------


def test_server_answers_as_postgresql(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute("SELECT version()").fetchone()
    assert row is not None
    assert row[0].startswith("PostgreSQL ")


def test_each_database_is_isolated(make_postgres_database: Callable[[], str]) -> None:
    first, second = make_postgres_database(), make_postgres_database()
    assert first != second
    with psycopg.connect(first) as conn:
        conn.execute("CREATE TABLE only_here (id int)")
    with psycopg.connect(second) as conn:
        found = conn.execute("SELECT to_regclass('only_here')").fetchone()
    assert found == (None,)


def test_fresh_database_replaces_an_old_one(postgres_server: PostgresServer) -> None:
    url = fresh_database(postgres_server, "mace_t_replaced")
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE leftover (id int)")
    url = fresh_database(postgres_server, "mace_t_replaced")
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT to_regclass('leftover')").fetchone() == (None,)
    drop_database(postgres_server, "mace_t_replaced")


def test_drop_database_while_a_connection_is_open(postgres_server: PostgresServer) -> None:
    url = fresh_database(postgres_server, "mace_t_busy")
    with psycopg.connect(url) as still_open:
        drop_database(postgres_server, "mace_t_busy")
        assert _is_gone(postgres_server, "mace_t_busy")
        with pytest.raises(psycopg.OperationalError):
            still_open.execute("SELECT 1")


def _is_gone(server: PostgresServer, name: str) -> bool:
    with psycopg.connect(server.url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", [name]).fetchone()
    return row == (0,)


# --- choosing a source (pure) -------------------------------------------------------------------


def test_the_url_wins_and_nothing_else_is_probed() -> None:
    url = "postgresql://u:p@db.example:6543/x"
    chosen = choose_sources({ENV_URL: url, "CI": "true"}, must_not_probe, no_binaries)
    assert chosen == [Candidate("env", url)]


def test_docker_comes_before_the_local_cluster(tmp_path: Path) -> None:
    chosen = choose_sources({}, docker_answers, binaries_at(tmp_path))
    assert [candidate.source for candidate in chosen] == ["testcontainers", "local-cluster"]
    assert chosen[1].detail == str(tmp_path)


@pytest.mark.parametrize("ci", ["true", "TRUE", "True"])
def test_ci_without_any_source_raises(ci: str) -> None:
    with pytest.raises(RuntimeError, match=REQUIRED_IN_CI):
        choose_sources({"CI": ci}, no_docker, no_binaries)


@pytest.mark.parametrize("env", [{}, {"CI": "false"}, {"CI": ""}])
def test_outside_ci_without_any_source_there_is_nothing_to_try(env: dict[str, str]) -> None:
    assert choose_sources(env, no_docker, no_binaries) == []


# --- the provider's decision, without a server --------------------------------------------------


def test_provider_raises_in_ci_without_a_server() -> None:
    with (
        pytest.raises(RuntimeError, match=REQUIRED_IN_CI),
        provide_postgres({"CI": "true"}, no_docker, no_binaries),
    ):
        pytest.fail("the provider should not have yielded")


def test_provider_raises_in_ci_when_the_only_source_fails(tmp_path: Path) -> None:
    """Binaries that are not there: the cluster cannot start, and CI must not quietly skip."""
    with (
        pytest.raises(RuntimeError, match="local-cluster"),
        provide_postgres({"CI": "true"}, no_docker, binaries_at(tmp_path)),
    ):
        pytest.fail("the provider should not have yielded")


def test_provider_yields_none_outside_ci_without_a_server() -> None:
    with provide_postgres({}, no_docker, no_binaries) as server:
        assert server is None


def test_provider_uses_the_url_as_is() -> None:
    url = "postgresql://mace:p%40ss@db.example:6543/ledger?sslmode=disable"
    with provide_postgres({ENV_URL: url}, must_not_probe, no_binaries) as server:
        assert server == PostgresServer(
            url=url,
            host="db.example",
            port=6543,
            user="mace",
            password="p@ss",
            dbname="ledger",
            source="env",
        )
