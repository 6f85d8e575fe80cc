"""``verify --all`` holds the log to every checkpoint, on SQLite and PostgreSQL.

Each attack edits the events table as someone with database access could: deleting, altering,
inserting or reordering an event below the newest checkpoint fails with INTEGRITY_FAILURE naming
the first checkpoint that no longer holds and the first log position (0-based leaf index, in
notification order, checkpoints left out) where the log differs. Events after the newest
checkpoint are only counted.
"""

from __future__ import annotations

import base64
from uuid import UUID

import pytest
from support.ledger_fixtures import RawTable, store_of
from support.sample_job import record_sample_job

from domain.checkpoint import CHECKPOINT_STREAM, LedgerCheckpoints, leaf_data
from domain.errors import IntegrityFailure
from domain.job import Job
from domain.merkle import leaf_hash
from infrastructure.application.ledger import Ledger
from infrastructure.storage.checkpoints.tables import LOG_NODES
from infrastructure.storage.settings import SQLiteStore
from infrastructure.storage.verification.scan import StoreReader

JOB = Job.id_for("job-1")
OTHER = Job.id_for("job-2")


def nid_column(table: RawTable) -> str:
    return "rowid" if isinstance(table.store, SQLiteStore) else "notification_id"


def log(table: RawTable) -> list[tuple[UUID, int]]:
    """The leaves' events, in notification order: what a checkpoint's positions count."""
    rows = table.execute(
        f"SELECT originator_id, originator_version FROM {{table}} ORDER BY {nid_column(table)}"
    )
    events = [(UUID(str(stream)), int(version)) for stream, version in rows]
    return [event for event in events if event[0] != CHECKPOINT_STREAM]


def nid(table: RawTable, stream: UUID, version: int) -> int:
    rows = table.execute(
        f"SELECT {nid_column(table)} FROM {{table}}"
        " WHERE originator_id = %s AND originator_version = %s",
        (table.key(stream), version),
    )
    return int(rows[0][0])


def set_nid(table: RawTable, stream: UUID, version: int, value: int) -> None:
    table.execute(
        f"UPDATE {{table}} SET {nid_column(table)} = %s"
        " WHERE originator_id = %s AND originator_version = %s",
        (value, table.key(stream), version),
    )


def two_checkpoints(ledger: Ledger) -> tuple[int, int]:
    """job-1 under checkpoint 1, job-2 under checkpoint 2: their tree sizes."""
    checkpoints = store_of(ledger).checkpoints
    assert checkpoints is not None
    record_sample_job(ledger)
    first = checkpoints.write().newest.checkpoint
    record_sample_job(ledger, "job-2", "s2")
    second = checkpoints.write().newest.checkpoint
    assert (first.number, second.number) == (1, 2)
    return first.tree_size, second.tree_size


def failure(ledger: Ledger) -> IntegrityFailure:
    with pytest.raises(IntegrityFailure) as caught:
        store_of(ledger).verify_all()
    return caught.value


def test_an_intact_store_verifies_every_checkpoint_and_counts_what_none_covers(
    ledger: Ledger, raw_table: RawTable
) -> None:
    two_checkpoints(ledger)
    covered = len(log(raw_table))
    ledger.jobs.start("job-3", "s3", "1 + 1", {})
    summary = store_of(ledger).verify_all()
    assert summary.tree is not None
    assert summary.tree.checkpoints == 2
    assert summary.tree.newest is not None
    assert summary.tree.newest.checkpoint.tree_size == covered
    assert summary.tree.not_yet_checkpointed == len(log(raw_table)) - covered == 1  # its start


def test_deleting_an_event_below_a_checkpoint_names_the_checkpoint_and_the_position(
    ledger: Ledger, raw_table: RawTable
) -> None:
    two_checkpoints(ledger)
    before = log(raw_table)
    position = before.index((OTHER, 2))
    raw_table.delete(OTHER, 2)
    caught = failure(ledger)
    assert (caught.stream, caught.version) == (str(CHECKPOINT_STREAM), 2)
    assert caught.reason == (
        f"checkpoint 2 no longer holds: the log differs from it first at position {position}"
        f" (the log now has stream {OTHER} version 3 there)"
    )


def test_deleting_the_last_event_below_a_checkpoint_is_caught_where_no_seal_would(
    ledger: Ledger, raw_table: RawTable
) -> None:
    two_checkpoints(ledger)
    *kept, last = log(raw_table)
    raw_table.delete(*last)
    ledger.jobs.start("job-3", "s3", "1 + 1", {})  # committed after checkpoint 2
    caught = failure(ledger)
    assert caught.reason.startswith(
        f"checkpoint 2 no longer holds: the log differs from it first at position {len(kept)}"
        " (the log now has stream "
    )
    assert caught.reason.endswith(" version 1 there, committed after it)")


def test_altering_an_event_below_a_checkpoint_names_the_first_one_that_held_it(
    ledger: Ledger, raw_table: RawTable
) -> None:
    two_checkpoints(ledger)
    position = log(raw_table).index((JOB, 2))
    state = bytearray(raw_table.state(JOB, 2))
    state[-3] ^= 0x01
    raw_table.set_column(JOB, 2, "state", bytes(state))
    caught = failure(ledger)
    assert (caught.stream, caught.version) == (str(CHECKPOINT_STREAM), 1)
    assert caught.reason == (
        f"checkpoint 1 no longer holds: the log differs from it first at position {position}"
        f" (the log now has stream {JOB} version 2 there)"
    )


def test_an_event_inserted_below_a_checkpoint_is_caught(
    ledger: Ledger, raw_table: RawTable
) -> None:
    two_checkpoints(ledger)
    # A free notification id below checkpoint 2: move checkpoint 1's row out of the way, then
    # copy an event there. Moving a checkpoint after the next one in commit order is caught
    # by itself; the tree is checked first, so the insertion is named before it.
    free = nid(raw_table, CHECKPOINT_STREAM, 1)
    assert store_of(ledger).recorder.max_notification_id() is not None
    set_nid(raw_table, CHECKPOINT_STREAM, 1, 10_000)
    moved = nid(raw_table, CHECKPOINT_STREAM, 2)
    assert failure(ledger).reason.startswith(f"checkpoint 2 sits at notification {moved},")
    position = len([n for n in log(raw_table) if nid(raw_table, *n) < free])
    topic, state = raw_table.rows(JOB)[1][1:]
    column = nid_column(raw_table)
    raw_table.execute(
        f"INSERT INTO {{table}} (originator_id, originator_version, topic, state, {column})"
        " VALUES (%s, %s, %s, %s, %s)",
        (raw_table.key(JOB), 9, topic, state, free),
    )
    caught = failure(ledger)
    assert caught.reason == (
        f"checkpoint 2 no longer holds: the log differs from it first at position {position}"
        f" (the log now has stream {JOB} version 9 there)"
    )


def test_two_events_swapped_in_notification_order_are_caught(
    ledger: Ledger, raw_table: RawTable
) -> None:
    two_checkpoints(ledger)
    first, second = nid(raw_table, OTHER, 2), nid(raw_table, OTHER, 3)
    position = log(raw_table).index((OTHER, 2))
    set_nid(raw_table, OTHER, 2, -1)
    set_nid(raw_table, OTHER, 3, first)
    set_nid(raw_table, OTHER, 2, second)
    caught = failure(ledger)
    assert caught.reason == (
        f"checkpoint 2 no longer holds: the log differs from it first at position {position}"
        f" (the log now has stream {OTHER} version 3 there)"
    )


def test_without_the_stored_leaves_the_position_is_narrowed_to_a_window(
    ledger: Ledger, raw_table: RawTable
) -> None:
    start, end = two_checkpoints(ledger)
    raw_table.execute(f"DELETE FROM {LOG_NODES} WHERE level = 0")
    raw_table.delete(OTHER, 2)
    caught = failure(ledger)
    assert caught.reason == (
        f"checkpoint 2 no longer holds: the log differs from it at a position from {start}"
        f" to {end} (checkpoint 1 holds those before); its stored leaves do not make its root,"
        " so the exact position is unknown"
    )


def test_a_checkpoint_deleted_from_the_chain_is_named(ledger: Ledger, raw_table: RawTable) -> None:
    two_checkpoints(ledger)
    record_sample_job(ledger, "job-3", "s3")
    checkpoints = store_of(ledger).checkpoints
    assert checkpoints is not None
    checkpoints.write()
    raw_table.delete(CHECKPOINT_STREAM, 2)
    caught = failure(ledger)
    assert (caught.stream, caught.version) == (str(CHECKPOINT_STREAM), 2)
    assert caught.reason == "version 2 is missing (next stored is 3)"


def test_the_databases_leaf_is_the_domains_and_a_row_without_state_has_none(
    ledger: Ledger, raw_table: RawTable
) -> None:
    two_checkpoints(ledger)
    # A topic of more than one byte per character: the database measures it in bytes too.
    raw_table.set_column(OTHER, 1, "topic", "domain.jobé:Job.Started")
    rows = raw_table.execute(
        "SELECT originator_id, originator_version, topic, state FROM {table}"
        f" ORDER BY {nid_column(raw_table)}"
    )
    expected = [
        leaf_hash(leaf_data(UUID(str(stream)), int(version), str(topic), bytes(state)))
        for stream, version, topic, state in rows
        if UUID(str(stream)) != CHECKPOINT_STREAM
    ]
    table = getattr(store_of(ledger).recorder, "events_table_name", None)
    assert isinstance(table, str)
    with StoreReader(store_of(ledger).location, table) as reader:
        assert [leaf.hash for leaf in reader.leaves(0, CHECKPOINT_STREAM)] == expected

    position = log(raw_table).index((JOB, 3))
    raw_table.set_column(JOB, 3, "state", None)
    with StoreReader(store_of(ledger).location, table) as reader:
        leaves = list(reader.leaves(0, CHECKPOINT_STREAM))
    assert leaves[position].hash is None
    caught = failure(ledger)
    assert caught.reason == (
        f"checkpoint 1 no longer holds: the log differs from it first at position {position}"
        f" (the log now has stream {JOB} version 3 there)"
    )


def forge_next(ledger: Ledger, **changes: object) -> None:
    """Append a checkpoint after the newest, signed and MAC'd with the ledger's own keys (what
    only a holder of both could do), its body the newest's with ``changes``."""
    checkpoints = store_of(ledger).checkpoints
    assert checkpoints is not None
    newest = checkpoints.newest()
    assert newest is not None
    number = newest.checkpoint.number
    update = {"number": number + 1, "previous": newest.checkpoint.digest(), **changes}
    body = newest.checkpoint.model_copy(update=update)
    event = LedgerCheckpoints.appended(
        LedgerCheckpoints.LEDGER,
        number,
        LedgerCheckpoints.Signed,
        checkpoint=body,
        key_id=checkpoints.key.key_id,
        signature=base64.b64encode(checkpoints.key.sign(body.signed_bytes())).decode(),
    )
    store_of(ledger).insert_records([store_of(ledger).mapper.to_stored_event(event)])


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"previous": "0" * 64}, "checkpoint 3 does not name checkpoint 2 as its previous"),
        ({"tree_size": 1}, "checkpoint 3 covers less of the log than checkpoint 2"),
        ({"last_notification_id": 1}, "checkpoint 3 covers less of the log than checkpoint 2"),
    ],
    ids=["previous", "tree-size", "notification-id"],
)
def test_a_signed_checkpoint_that_breaks_the_chain_is_named(
    ledger: Ledger, changes: dict[str, object], reason: str
) -> None:
    two_checkpoints(ledger)
    forge_next(ledger, **changes)
    caught = failure(ledger)
    assert (caught.stream, caught.version, caught.reason) == (str(CHECKPOINT_STREAM), 3, reason)


def test_a_signed_checkpoint_over_a_log_it_does_not_match_is_named(ledger: Ledger) -> None:
    two_checkpoints(ledger)
    forge_next(ledger, root="ab" * 32)
    caught = failure(ledger)
    assert caught.reason.startswith("checkpoint 3 no longer holds: ")
