"""PostgreSQL: a read in a transaction ends with a read-only COMMIT, never a ROLLBACK.

psycopg forgets every statement it prepared on a connection after a rollback, and sends
``DEALLOCATE ALL``: eventsourcing ended every read transaction so, and each made the next reads
parse their statements again. A read transaction is now begun ``READ ONLY`` and committed: the
prepared statements survive, and a write slipped into one is refused by the server, writing
nothing. (SQLite prepares in the process; its reads are eventsourcing's.)
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from eventsourcing.persistence import PersistenceError
from support.ledger_fixtures import settings_for, store_of
from support.sent_statements import sent_statements

from infrastructure.application.ledger import Ledger

READS = 8
"""More reads than psycopg's threshold (5) before it prepares a statement."""


def test_reads_in_a_transaction_commit_and_keep_their_prepared_statements(
    make_postgres_store: Callable[[], str],
) -> None:
    with Ledger.open(settings_for(make_postgres_store())) as ledger:
        ledger.jobs.run("2 + 3", "s1")
        ledger.checkpoints.write()
        store = store_of(ledger)
        assert store.checkpoints is not None
        tables = store.checkpoints.tables
        with sent_statements(store) as sent:
            for _ in range(READS):
                tables.head_index()  # two statements in one transaction
        assert sent.count("BEGIN READ ONLY") == sent.count("COMMIT") == READS, sent
        assert not [s for s in sent if s.startswith(("ROLLBACK", "DEALLOCATE"))], sent


def test_a_write_in_a_read_transaction_is_refused_and_writes_nothing(
    make_postgres_store: Callable[[], str],
) -> None:
    with Ledger.open(settings_for(make_postgres_store())) as ledger:
        datastore = store_of(ledger).recorder.datastore  # type: ignore[attr-defined]
        with (
            pytest.raises(PersistenceError, match="read-only transaction"),
            datastore.transaction(commit=False) as cursor,
        ):
            cursor.execute("CREATE TABLE slipped_in (n int)")
        with datastore.transaction(commit=False) as cursor:
            cursor.execute("SELECT to_regclass('slipped_in') AS found")
            assert cursor.fetchone()["found"] is None
