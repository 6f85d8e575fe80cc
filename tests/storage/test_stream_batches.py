"""Streams read together (`LedgerStore.read_streams`, one query for many streams), on SQLite and
PostgreSQL: each stream gets its own events, and every check a read of one stream makes still
holds for each of them (the checkpointed head, the head index proven, a row without state)."""

from __future__ import annotations

from collections.abc import Iterator
from uuid import UUID

import pytest
from support.ledger_fixtures import RawTable, store_of

from domain.checkpoint import CHECKPOINT_STREAM
from domain.errors import IntegrityFailure
from domain.sem import SemEntry
from domain.snapshot import Snapshot
from domain.stream_heads import bucket_of
from infrastructure.application.ledger import Ledger
from infrastructure.storage.checkpoints import head_check
from infrastructure.storage.records.signed_record import NO_STATE
from infrastructure.storage.settings import Settings

KEYS = [f"user/customer/{name}/plan" for name in ("alice", "bob", "carol", "dave", "erin")]
STREAMS = [SemEntry.id_for(key) for key in KEYS]
ABSENT = SemEntry.id_for("user/customer/nobody/plan")


@pytest.fixture
def fresh(settings: Settings) -> Iterator[Ledger]:
    """A second ledger on the same store, as another process would open it."""
    with Ledger.open(settings, checkpoint_on_close=False) as other:
        yield other


def stored(ledger: Ledger) -> int:
    """Each key written as many times as its place in KEYS, plus one; then checkpointed: the
    checkpoint's number."""
    for count, key in enumerate(KEYS, start=1):
        for value in range(count):
            ledger.sem.put(key, f"value {value}")
    checkpoints = store_of(ledger).checkpoints
    assert checkpoints is not None
    return checkpoints.write().newest.checkpoint.number


def versions(events: object) -> list[tuple[UUID, int]]:
    assert isinstance(events, list | tuple)
    return [(e.originator_id, e.originator_version) for e in events]


def test_each_stream_gets_its_own_events_in_version_order(
    settings: Settings, ledger: Ledger, fresh: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored(ledger)
    alone = {s: versions(store_of(fresh).recorder.select_events(s)) for s in [*STREAMS, ABSENT]}
    assert alone[ABSENT] == []
    assert [len(alone[s]) for s in STREAMS] == [1, 2, 3, 4, 5]

    together = store_of(fresh).repository.read([ABSENT, *reversed(STREAMS)])
    assert {s: versions(list(events)) for s, events in together.items()} == alone
    assert list(together) == [ABSENT, *reversed(STREAMS)]

    # Cut into several statements and several reads of the head index (a process that has
    # proven no bucket yet), the answer is the same.
    monkeypatch.setattr(head_check, "STREAMS_PER_QUERY", 2)
    monkeypatch.setattr(head_check, "PATHS_PER_READ", 1)
    with Ledger.open(settings, checkpoint_on_close=False) as another:
        chunked = store_of(another).repository.read([*STREAMS, ABSENT])
    assert {s: versions(list(events)) for s, events in chunked.items()} == alone


def test_a_truncated_stream_read_with_others_fails_as_it_fails_alone(
    ledger: Ledger, raw_table: RawTable, fresh: Ledger
) -> None:
    number = stored(ledger)
    raw_table.delete(STREAMS[2], 3)
    raw_table.delete(STREAMS[4], 1)  # an earlier version: a gap, which verification finds
    for name in ("deleted tail", "deleted whole"):
        if name == "deleted whole":
            for version in (1, 2):
                raw_table.delete(STREAMS[2], version)
        with pytest.raises(IntegrityFailure) as alone:
            store_of(fresh).recorder.select_events(STREAMS[2])
        with pytest.raises(IntegrityFailure) as together:
            store_of(fresh).repository.read([STREAMS[0], ABSENT, STREAMS[2], STREAMS[1]])
        assert str(together.value) == str(alone.value), name
        assert f"truncated below checkpoint {number}" in str(together.value)

    read = store_of(fresh).repository.read([STREAMS[4]])  # its head is there: read, then refused
    with pytest.raises(IntegrityFailure, match="version 1 is missing"):
        store_of(fresh).repository.aggregate(SemEntry, STREAMS[4], read[STREAMS[4]])


def test_an_edited_head_index_fails_a_read_of_several_streams(
    ledger: Ledger, raw_table: RawTable, fresh: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored(ledger)
    raw_table.delete(STREAMS[3], 4)
    # The attacker makes the index agree with the shortened stream: its bucket rolled back.
    bucket = bucket_of(STREAMS[3])
    assert len({bucket_of(s) for s in STREAMS}) == len(STREAMS)
    raw_table.execute("DELETE FROM mace_head_buckets WHERE bucket = %s", (bucket,))
    monkeypatch.setattr(head_check, "PATHS_PER_READ", 2)  # the edited bucket in a later read
    with pytest.raises(IntegrityFailure) as caught:
        store_of(fresh).repository.read(STREAMS)
    assert caught.value.stream == str(CHECKPOINT_STREAM)
    assert caught.value.reason.startswith("the head index disagrees with checkpoint")


def test_a_row_without_state_read_with_others_fails_closed(
    ledger: Ledger, raw_table: RawTable, fresh: Ledger
) -> None:
    stored(ledger)
    raw_table.set_column(STREAMS[1], 2, "state", None)
    with pytest.raises(IntegrityFailure) as caught:
        read = store_of(fresh).repository.read(STREAMS)
        for stream, records in read.items():
            store_of(fresh).repository.aggregate(SemEntry, stream, records)
    assert (caught.value.stream, caught.value.version) == (str(STREAMS[1]), 2)
    assert caught.value.reason == NO_STATE


def test_snapshots_looked_up_together_are_each_verified(
    ledger: Ledger, raw_table: RawTable, fresh: Ledger
) -> None:
    ids = ledger.snapshots.default_ids()
    absent = "f" * 64
    router = Snapshot.id_for(ids["router"])
    state = raw_table.state(router, 1)
    raw_table.set_column(router, 1, "state", state.replace(b'"mace/', b'"made/', 1))
    with pytest.raises(IntegrityFailure) as caught:
        fresh.snapshots.stored_ids(ids.values())
    assert caught.value.stream == str(router)

    raw_table.set_column(router, 1, "state", state)
    assert fresh.snapshots.stored_ids([*ids.values(), absent]) == set(ids.values())
    with pytest.raises(ValueError, match="invalid snapshot id 'nope'"):
        fresh.snapshots.stored_ids(["nope"])


def test_a_snapshot_verified_once_is_not_read_again_by_that_process(
    ledger: Ledger, raw_table: RawTable, fresh: Ledger
) -> None:
    """A snapshot stream is written once: a process that verified one does not read it for
    every job again; tampering after that is found by every other reader (and by `verify`)."""
    ids = ledger.snapshots.default_ids()
    assert fresh.snapshots.stored_ids(ids.values()) == set(ids.values())
    router = Snapshot.id_for(ids["router"])
    state = raw_table.state(router, 1)
    raw_table.set_column(router, 1, "state", state.replace(b'"mace/', b'"made/', 1))

    assert fresh.snapshots.stored_ids(ids.values()) == set(ids.values())
    with pytest.raises(IntegrityFailure) as caught:
        ledger.snapshots.stored_ids(ids.values())
    assert caught.value.stream == str(router)
    with pytest.raises(IntegrityFailure):
        store_of(ledger).verify_all()
