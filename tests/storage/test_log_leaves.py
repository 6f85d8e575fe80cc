"""The log's leaf index (``mace_log_leaves``), on SQLite and PostgreSQL: an event's leaf position
is its rank among the events of every stream but the checkpoints', in notification order, known
once a checkpoint writer has reached it, and every proof made from it is checked."""

from __future__ import annotations

from uuid import UUID

import pytest
from eventsourcing.persistence import StoredEvent
from support.ledger_fixtures import store_of

from domain.checkpoint import CHECKPOINT_STREAM
from domain.errors import IntegrityFailure
from infrastructure.application.ledger import Ledger
from infrastructure.storage.checkpoints.chain import Checkpoints
from infrastructure.storage.checkpoints.inclusion_proofs import inclusion_proofs
from infrastructure.storage.checkpoints.tables import EventKey


def checkpoints_of(ledger: Ledger) -> Checkpoints:
    checkpoints = store_of(ledger).checkpoints
    assert checkpoints is not None
    return checkpoints


def stored_in_log_order(ledger: Ledger) -> list[StoredEvent]:
    notifications = store_of(ledger).recorder.select_notifications(0, 100_000)
    return [
        StoredEvent(UUID(str(n.originator_id)), n.originator_version, n.topic, n.state)
        for n in notifications
        if UUID(str(n.originator_id)) != CHECKPOINT_STREAM
    ]


def keys(records: list[StoredEvent]) -> list[EventKey]:
    return [(UUID(str(r.originator_id)), r.originator_version) for r in records]


def start_job(ledger: Ledger, job_id: str) -> None:
    ledger.jobs.start(job_id, "s", "2 + 3", ledger.snapshots.default_ids())


def test_a_leaf_position_is_the_events_rank_in_the_log_once_checkpointed(ledger: Ledger) -> None:
    checkpoints = checkpoints_of(ledger)
    start_job(ledger, "first")
    checkpoints.write()
    start_job(ledger, "second")
    newest = checkpoints.write().newest.checkpoint
    covered = stored_in_log_order(ledger)
    assert newest.number == 2
    assert len(covered) == newest.tree_size
    start_job(ledger, "third")
    later = stored_in_log_order(ledger)[len(covered) :]
    assert later

    positions = checkpoints.tables.leaf_positions(keys(covered + later))
    assert positions == {key: rank for rank, key in enumerate(keys(covered))}
    proofs = inclusion_proofs(checkpoints.tables, newest, covered)
    assert proofs is not None
    assert [p.leaf_index for p in proofs] == list(range(len(covered)))
    assert inclusion_proofs(checkpoints.tables, newest, later) is None  # not yet covered


EDITS = {
    "node altered": ("UPDATE mace_log_nodes SET hash = ? WHERE level = 0 AND idx = 0", 1),
    "node deleted": ("DELETE FROM mace_log_nodes WHERE level = 0 AND idx = 1", None),
    "positions swapped": (
        "UPDATE mace_log_leaves SET position = -1 WHERE position = 0;"
        " UPDATE mace_log_leaves SET position = 0 WHERE position = 1;"
        " UPDATE mace_log_leaves SET position = 1 WHERE position = -1",
        0,
    ),
}


@pytest.mark.parametrize("edit", EDITS)
def test_a_proof_from_edited_rows_is_refused(ledger: Ledger, edit: str) -> None:
    """Someone with database access edits the node or leaf table: no proof comes out of it."""
    checkpoints = checkpoints_of(ledger)
    start_job(ledger, "first")
    newest = checkpoints.write().newest.checkpoint
    covered = stored_in_log_order(ledger)
    statements, failing = EDITS[edit]
    mark = "%s" if checkpoints.tables.postgres else "?"
    datastore = store_of(ledger).recorder.datastore  # type: ignore[attr-defined]
    with datastore.transaction(commit=True) as cursor:
        for statement in statements.split(";"):
            params = (bytes(32),) if "?" in statement else ()
            cursor.execute(statement.replace("?", mark), params)
    with pytest.raises(IntegrityFailure) as failure:
        inclusion_proofs(checkpoints.tables, newest, covered)
    if failing is None:
        expected = f"stream {CHECKPOINT_STREAM} version 1: checkpoint 1: log node (0, 1) is not"
    else:
        stream, version = keys(covered)[failing]
        expected = f"stream {stream} version {version}: not included in checkpoint 1"
    assert str(failure.value).startswith(f"INTEGRITY_FAILURE: {expected}")
