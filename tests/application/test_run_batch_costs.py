"""What one batch of a run sent in batches costs the store and the process, on SQLite and
PostgreSQL (issue 29, point 1): each event is encoded once on its way in, whatever the run already
holds, and a batch sends the store the same statements whether it carries 10 events or 100.

Counts, never timings. Before, every batch encoded every event the run held again to hold the run
to its byte limit (batch k of a run paid for the k - 1 before it).
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import pytest
from support.encoding_counts import encodings
from support.recorder_calls import recorder_calls

from domain.events import RunEvent, RunStarted, StageTransition
from domain.job import DEFAULT_TENANT
from infrastructure.application.ledger import Ledger

Batch = list[tuple[str, RunEvent]]


def batch(first: int, count: int) -> Batch:
    return [(f"e{n}", StageTransition(to_stage=f"s{n}")) for n in range(first, first + count)]


Statement = tuple[str, int]


def statements(ledger: Ledger) -> AbstractContextManager[list[Statement]]:
    """Every read or write of the events table while the block runs: the recorder method and how
    many streams or rows it was sent (a read names one stream; a write, its rows)."""
    names = ("select_events", "select_streams", "insert_events_with")
    return recorder_calls(
        ledger, names, lambda name, args, _: (name, 1 if name == "select_events" else len(args[0]))
    )


def open_run(ledger: Ledger, run_id: str, held: int) -> None:
    """A run holding ``held`` events, sent as one batch; it declares the default snapshots, its
    privacy rules among them, as an emitter's run does."""
    ids = ledger.snapshots.default_ids()
    started = RunStarted(seed=7, input="hi", job_id=run_id, snapshot_ids=ids)
    ledger.run_uploads.open(started, DEFAULT_TENANT)
    ledger.run_uploads.append(run_id, DEFAULT_TENANT, batch(0, held))


def test_a_batch_encodes_each_of_its_events_once_whatever_the_run_holds(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: dict[tuple[int, int], int] = {}
    for held in (10, 100):
        for size in (10, 100):
            run_id = f"r-{held}-{size}"
            open_run(ledger, run_id, held)
            sent = batch(held, size)
            with encodings(monkeypatch) as count:
                ledger.run_uploads.append(run_id, DEFAULT_TENANT, sent)
            made[held, size] = count[0]
    # What the run held before costs the batch nothing...
    assert made[100, 10] == made[10, 10]
    assert made[100, 100] == made[10, 100]
    # ...and each event of the batch is encoded once (its digest and size from one encoding).
    assert made[10, 100] - made[10, 10] == 90


def test_a_batch_sends_the_store_the_same_statements_whatever_its_size(ledger: Ledger) -> None:
    sent: dict[int, list[Statement]] = {}
    for size in (10, 100):
        run_id = f"r-{size}"
        open_run(ledger, run_id, size)
        with statements(ledger) as seen:
            ledger.run_uploads.append(run_id, DEFAULT_TENANT, batch(size, size))
        sent[size] = seen
    # One read of the run (its index of the events its job holds: a batch appends to the job
    # where the index says it stands, without reading it), one insert (the batch's events, each
    # one row of the job, and one row indexing them on the run), one commit; the run's privacy
    # rules, an immutable snapshot, were read and verified once by this process.
    for size, seen in sent.items():
        assert seen == [("select_events", 1), ("insert_events_with", size + 1)]


def test_completing_a_run_encodes_its_held_events_no_more_than_the_job_records_them(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held events are read back from the ledger's own verified canonical bytes: neither
    their validation nor the run's limits encode them again (each did, before: four encodings
    an event). What is left is the job's own: its record and the signed bytes stored."""
    made: dict[int, int] = {}
    for held in (10, 110):
        run_id = f"r-{held}"
        open_run(ledger, run_id, held)
        with encodings(monkeypatch) as count:
            ledger.run_uploads.complete(run_id, DEFAULT_TENANT, "done")
        made[held] = count[0]
    assert made[110] - made[10] <= 2 * 100
