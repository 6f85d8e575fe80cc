"""Memory logs read from snapshots (`domain.memories.MemorySnapshot`), on SQLite and PostgreSQL:
the log a snapshot and the events after it make is the log its events alone make, at every
position; a snapshot is verified like an event, and one deleted or altered fails closed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.ledger_fixtures import RawTable, store_of

from domain.errors import IntegrityFailure
from domain.governance import Actor
from domain.memories import SNAPSHOT_INTERVAL, MemoryLog, MemorySnapshot
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings

TENANT = "acme"
WRITER = Actor.of("mia", ["operator"])
WRITES = 2 * SNAPSHOT_INTERVAL + 37


@pytest.fixture
def fresh(settings: Settings) -> Iterator[Ledger]:
    """A second ledger on the same store, as another process would open it."""
    with Ledger.open(settings, checkpoint_on_close=False) as other:
        yield other


def written(ledger: Ledger, count: int = WRITES) -> None:
    """Facts on a few keys written again and again, episodes, and forgotten memories."""
    for n in range(count):
        if n % 5 == 4:
            live = ledger.memories.memories(TENANT)
            ledger.memories.forget(TENANT, live[n % len(live)].memory_id, f"drop {n}", WRITER)
        elif n % 3:
            key = f"user/customer/c{n % 7}/plan"
            ledger.memories.remember_fact(TENANT, key, f"plan {n}", ["pii"][: n % 2], WRITER, None)
        else:
            ledger.memories.remember_episode(TENANT, f"episode {n}", [], WRITER, {"n": n})


def from_events(ledger: Ledger, position: int | None = None) -> MemoryLog:
    """The log its events alone make (eventsourcing's repository, no snapshot)."""
    log: MemoryLog = store_of(ledger).repository.get(MemoryLog.id_for(TENANT), version=position)
    return log


def state(log: MemoryLog | None) -> tuple[Any, ...]:
    assert log is not None
    live = [m.as_json() for m in log.live()]
    return log.id, log.version, log.created_on, log.modified_on, log.tenant, live


def snapshot_stream(version: int) -> Any:
    return MemorySnapshot.id_for(MemorySnapshot.name_at(TENANT, version))


def test_a_log_read_from_its_snapshot_is_the_log_its_events_make(
    ledger: Ledger, fresh: Ledger
) -> None:
    written(ledger)
    head = from_events(fresh).version
    assert head == WRITES + 1  # the log opened, then one event a write
    for version in (SNAPSHOT_INTERVAL, 2 * SNAPSHOT_INTERVAL):
        assert store_of(fresh).stream_exists(snapshot_stream(version))
    assert not store_of(fresh).stream_exists(snapshot_stream(3 * SNAPSHOT_INTERVAL))

    for position in (None, 1, 99, 100, 101, 150, 199, 200, 201, head, head + 50):
        expected = from_events(fresh, None if position is None else min(position, head))
        assert state(fresh.memories.log(TENANT, position)) == state(expected), position
    assert fresh.memories.log(TENANT, 0) is None
    assert fresh.memories.log("nobody") is None

    # A write after a snapshot continues from it: the ids and supersedes it makes are those the
    # whole log would make.
    memory = fresh.memories.remember_fact(TENANT, "user/customer/c1/plan", "gold", [], WRITER, None)
    assert state(fresh.memories.log(TENANT)) == state(from_events(fresh))
    assert memory.position == head + 1


def test_an_altered_snapshot_fails_closed(
    ledger: Ledger, raw_table: RawTable, fresh: Ledger
) -> None:
    written(ledger, SNAPSHOT_INTERVAL + 3)
    stream = snapshot_stream(SNAPSHOT_INTERVAL)
    stored = raw_table.state(stream, 1)
    altered = stored.replace(b'"tenant":"acme"', b'"tenant":"acmf"', 1)
    assert altered != stored
    raw_table.set_column(stream, 1, "state", altered)
    with pytest.raises(IntegrityFailure) as caught:
        fresh.memories.log(TENANT)
    assert caught.value.stream == str(stream)
    with pytest.raises(IntegrityFailure):
        fresh.memories.remember_episode(TENANT, "one more", [], WRITER, None)
    assert from_events(fresh).version == SNAPSHOT_INTERVAL + 4  # nothing written


def test_a_signed_snapshot_the_events_after_it_contradict_fails_closed(
    ledger: Ledger, raw_table: RawTable, fresh: Ledger
) -> None:
    """Forged by a holder of the signing key: the snapshot drops a memory that an event after
    it forgets. The log cannot be both, so reading it is an integrity failure (not a crash)."""
    written(ledger, SNAPSHOT_INTERVAL - 1)
    stream = snapshot_stream(SNAPSHOT_INTERVAL)
    dropped = ledger.memories.memories(TENANT)[0]
    ledger.memories.forget(TENANT, dropped.memory_id, "gone", WRITER)
    store = store_of(ledger)
    (record,) = store.recorder.select_events(stream)
    taken = store.mapper.to_domain_event(record)
    assert isinstance(taken, MemorySnapshot.Taken)
    forged = taken.model_copy(
        update={"live": [m for m in taken.live if m["memory_id"] != dropped.memory_id]}
    )
    assert len(forged.live) == len(taken.live) - 1
    raw_table.set_column(stream, 1, "state", store.mapper.to_stored_event(forged).state)
    head = from_events(fresh).version

    with pytest.raises(IntegrityFailure) as caught:
        fresh.memories.log(TENANT)
    assert caught.value.stream == str(MemoryLog.id_for(TENANT))
    assert "do not follow from its snapshot at 100" in str(caught.value)
    with pytest.raises(IntegrityFailure):
        fresh.memories.remember_episode(TENANT, "one more", [], WRITER, None)
    assert from_events(fresh).version == head  # nothing written


def test_a_deleted_snapshot_is_read_around_unless_a_checkpoint_counts_it(
    ledger: Ledger, raw_table: RawTable, fresh: Ledger
) -> None:
    written(ledger, SNAPSHOT_INTERVAL + 3)
    stream = snapshot_stream(SNAPSHOT_INTERVAL)
    raw_table.delete(stream, 1)
    # No checkpoint counts it yet: the log is read from its start, and is the same log.
    assert state(fresh.memories.log(TENANT)) == state(from_events(fresh))

    written(ledger, SNAPSHOT_INTERVAL)  # the next snapshot, then a checkpoint over it
    checkpoints = store_of(ledger).checkpoints
    assert checkpoints is not None
    checkpoints.write()
    raw_table.delete(snapshot_stream(2 * SNAPSHOT_INTERVAL), 1)
    with pytest.raises(IntegrityFailure, match="truncated below checkpoint"):
        fresh.memories.log(TENANT)
