"""What a read costs the store: the statements ``GET /v1/jobs?limit=1`` sends, counted.

An idle service's listing (a checkpointed store, its newest checkpoint proven longer ago than a
process keeps it: `head_check.CACHE_SECONDS`) catches the read models up, reads the page and
holds the listed jobs to their checkpointed heads, in the statements counted here and no more:
no view position read twice, no projection stamp read on every request, no snapshot stream read
once per snapshot, no connection of its own, no head index path proven again against the same
checkpoint. On PostgreSQL a read ends without a rollback, so psycopg never deallocates the
statements it prepared (``DEALLOCATE ALL``). Counts, not timings; both stores.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support.api_support import Api
from support.ledger_fixtures import store_of
from support.sent_statements import sent_statements

from infrastructure.application.ledger import Ledger
from infrastructure.storage import store as store_module
from infrastructure.storage.checkpoints.head_check import CACHE_SECONDS, HeadCheck
from infrastructure.storage.settings import SQLiteStore

LISTING = "/v1/jobs?limit=1"


def idle(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """A clock for the head check that stands still within a request; call what this returns
    between two requests to make the newest checkpoint older than a process keeps it."""
    check = getattr(store_of(ledger).recorder, "head_check", None)
    assert isinstance(check, HeadCheck)
    now = [0.0]
    monkeypatch.setattr(check, "_clock", lambda: now[0])

    def later() -> None:
        now[0] += CACHE_SECONDS + 1

    return later


def test_a_listing_of_one_job_sends_few_statements_and_no_rollback(
    api: Api, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    for seed in ("s1", "s2", "s3"):
        api.new_job(seed=seed)
    ledger.checkpoints.write()
    later = idle(ledger, monkeypatch)
    # The views caught up; and psycopg prepares a query the fifth time a connection runs it, as a
    # service that has run a while has them: a prepared statement is counted by its text too.
    for _ in range(6):
        assert api.get(LISTING).status_code == 200
    later()
    # The listed jobs are held to their heads through the store's pool: no connection of its own.
    monkeypatch.setattr(store_module, "StoreReader", None)
    with sent_statements(store_of(ledger)) as sent:
        response = api.get(LISTING)
    assert response.status_code == 200 and len(response.json()["jobs"]) == 1
    sqlite = isinstance(store_of(ledger).location, SQLiteStore)
    # The log's head, nothing new since; on PostgreSQL its settled head (docs/ordering.md): how
    # far the ids were drawn, the writers' barrier, the last committed id up to there.
    head = (
        ["SELECT MAX("]
        if sqlite
        else [
            "SELECT pg_catalog.pg_sequence_last_value",
            "SELECT pg_catalog.pg_advisory_xact_lock",
            "SELECT MAX(notification_id) AS head",
        ]
    )
    reads = [
        "SELECT MAX(notification_id)",  # the read models' position
        *head,
        "SELECT row_key, row_json",  # the job index
        "SELECT originator_id, originator_version, topic, state",  # its snapshots, at once
        "SELECT * FROM",  # the newest checkpoint, read again (its paths stay proven)
        "SELECT originator_id, MAX(originator_version)",  # the listed jobs' heads
    ]
    # On SQLite, eventsourcing's reads and the head-checked stream reads begin and roll back a
    # transaction of their own, in the process: no round trip, no prepared statement lost.
    statements = [s for s in sent if not sqlite or s not in {"BEGIN", "ROLLBACK"}]
    assert len(statements) == len(reads), sent
    assert all(s.startswith(r) for s, r in zip(statements, reads, strict=True)), sent
    assert len(sent) == len(reads) + (2 * 4 if sqlite else 0), sent
