"""Replay leases (`infrastructure.storage.backends.replay_leases`) on SQLite and PostgreSQL: a
lease is held exactly while its block runs, and on PostgreSQL the connection kept for the next lease
neither holds an old one nor outlives the ledger, and is replaced when the server drops it."""

from __future__ import annotations

import psycopg
import pytest

from infrastructure.application.ledger import Ledger
from infrastructure.storage.backends.connection import connect_postgres
from infrastructure.storage.backends.replay_leases import LEASE_APPLICATION
from infrastructure.storage.settings import PostgresStore, Settings

KEPT = (
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
    f" AND application_name = '{LEASE_APPLICATION}'"
)


def admin(settings: Settings) -> psycopg.Connection[tuple[object, ...]]:
    """A session of its own on the store's database, as an operator at a psql prompt."""
    store = settings.parsed_store()
    assert isinstance(store, PostgresStore)
    return connect_postgres(store)


def test_a_lease_is_held_only_while_its_block_runs(ledger: Ledger) -> None:
    leases = ledger.governance.leases
    with leases.hold() as first:
        assert leases.held({first}) == {first}
    assert leases.held({first}) == set()
    with leases.hold() as second:
        assert second != first
        assert leases.held({first, second}) == {second}
    assert leases.held({first, second}) == set()

    with pytest.raises(RuntimeError), leases.hold() as failed:
        raise RuntimeError("the replay failed")
    assert leases.held({failed}) == set()


@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
def test_the_kept_connection_is_replaced_when_dropped_and_closed_with_the_ledger(
    settings: Settings,
) -> None:
    with admin(settings) as dba, Ledger.open(settings) as ledger:
        leases = ledger.governance.leases
        with leases.hold():
            pass
        kept = dba.execute(KEPT).fetchall()
        assert len(kept) == 1  # given back unlocked, and kept for the next lease

        dba.execute("SELECT pg_terminate_backend(%s)", kept[0])
        with leases.hold() as lease:
            assert leases.held({lease}) == {lease}
        assert leases.held({lease}) == set()
    with admin(settings) as dba:
        assert dba.execute(KEPT).fetchall() == []
