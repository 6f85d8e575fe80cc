"""The head check under every read of a stream (`infrastructure.storage.checkpoints.head_check`),
on SQLite and PostgreSQL: which reads it holds to the checkpointed head, the head index proven
against the checkpoint (an edited index fails closed), a stale checkpoint re-read, and what it
leaves alone (events newer than the newest checkpoint)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import orjson
import pytest
from support.api_support import CALLERS, Api, assert_error
from support.ledger_fixtures import RawTable, store_of

from domain.canonical import canonical_json
from domain.checkpoint import CHECKPOINT_STREAM
from domain.errors import IntegrityFailure, NotFoundError
from domain.governance import Actor
from domain.policy_book import PolicyBook, scope_of
from domain.sem import SemEntry
from domain.stream_heads import bucket_of, path_positions
from infrastructure.application.ledger import Ledger
from infrastructure.storage.checkpoints.head_check import (
    CACHE_SECONDS,
    PATH_HASHES,
    WHOLE_INDEX_AFTER,
    WholeIndex,
)
from infrastructure.storage.checkpoints.tables import CheckpointTables
from infrastructure.storage.settings import Settings

KEY = "user/customer/alice/plan"
STREAM = SemEntry.id_for(KEY)


def put(ledger: Ledger, *values: str) -> None:
    for value in values:
        ledger.sem.put(KEY, value)


def checkpointed(ledger: Ledger) -> int:
    """Checkpoint everything stored now; the checkpoint's number."""
    checkpoints = store_of(ledger).checkpoints
    assert checkpoints is not None
    return checkpoints.write().newest.checkpoint.number


@pytest.fixture
def table(settings: Settings, ledger: Ledger) -> RawTable:
    return RawTable(settings)


@pytest.fixture
def fresh(settings: Settings) -> Iterator[Ledger]:
    """A second ledger on the same store, as another process would open it; it writes no
    checkpoint of its own when closed."""
    with Ledger.open(settings, checkpoint_on_close=False) as other:
        yield other


def truncation(stream: UUID, missing: int, number: int, head: int, held: str) -> str:
    return (
        f"stream {stream} version {missing}: truncated below checkpoint {number}, which records"
        f" the stream's head at version {head}; the store {held}"
    )


def test_every_kind_of_read_of_a_truncated_stream_fails_closed(
    ledger: Ledger, table: RawTable, fresh: Ledger
) -> None:
    put(ledger, "silver", "gold", "platinum")
    number = checkpointed(ledger)
    table.delete(STREAM, 3)
    store, events = store_of(fresh), store_of(fresh).verifying_store
    short = truncation(STREAM, 3, number, 3, "ends at version 2")

    reads: dict[str, Callable[[], object]] = {
        "get": lambda: list(events.get(STREAM)),
        "read_verified": lambda: events.read_verified(STREAM),
        "get from a version on": lambda: list(events.get(STREAM, gt=1)),
        "the newest version": lambda: list(events.get(STREAM, desc=True, limit=1)),
        "stream_version": lambda: store.stream_version(STREAM),
        "get_aggregate": lambda: store.repository.get_one(SemEntry, STREAM, "SEM entry"),
        "up to a version above the store's end": lambda: list(events.get(STREAM, lte=3)),
    }
    for name, read in reads.items():
        with pytest.raises(IntegrityFailure) as caught:
            read()
        assert str(caught.value) == f"INTEGRITY_FAILURE: {short}", name

    # What a read asks only of older versions is there: no check fails it.
    assert [e.originator_version for e in events.get(STREAM, lte=2)] == [1, 2]
    assert [e.originator_version for e in events.get(STREAM, limit=1)] == [1]
    assert store.stream_exists(STREAM)


def test_a_stream_deleted_whole_is_not_absent(
    ledger: Ledger, table: RawTable, fresh: Ledger
) -> None:
    put(ledger, "silver")
    number = checkpointed(ledger)
    table.delete(STREAM, 1)
    gone = truncation(STREAM, 1, number, 1, "holds none of it")

    for read in (
        lambda: store_of(fresh).stream_exists(STREAM),
        lambda: store_of(fresh).repository.get_one(SemEntry, STREAM, "SEM entry"),
        lambda: fresh.sem.get(KEY),
    ):
        with pytest.raises(IntegrityFailure) as caught:
            read()
        assert str(caught.value) == f"INTEGRITY_FAILURE: {gone}"

    # A stream no checkpoint counts is absent as before.
    other = SemEntry.id_for("user/customer/bob/plan")
    assert not store_of(fresh).stream_exists(other)
    with pytest.raises(NotFoundError):
        store_of(fresh).repository.get_one(SemEntry, other, "SEM entry")


def test_events_newer_than_the_newest_checkpoint_are_not_blocked(
    ledger: Ledger, table: RawTable, fresh: Ledger
) -> None:
    put(ledger, "silver")
    checkpointed(ledger)
    put(fresh, "gold", "platinum")  # no checkpoint covers versions 2 and 3
    assert store_of(fresh).stream_version(STREAM) == 3
    # Not yet covered, so not yet protected: docs/threat-model.md says so.
    table.delete(STREAM, 3)
    assert store_of(fresh).stream_version(STREAM) == 2
    table.delete(STREAM, 2)
    assert store_of(fresh).stream_version(STREAM) == 1
    table.delete(STREAM, 1)
    with pytest.raises(IntegrityFailure):
        store_of(fresh).stream_version(STREAM)


def test_a_checkpoint_written_elsewhere_is_read_again_not_taken_for_an_edit(
    ledger: Ledger, table: RawTable, fresh: Ledger
) -> None:
    put(ledger, "silver")
    checkpointed(ledger)
    assert fresh.sem.get(KEY)[1].value == "silver"  # fresh holds checkpoint 1, KEY's bucket proven

    put(ledger, "gold")
    number = checkpointed(ledger)  # the index moves on: checkpoint 1 no longer matches it
    table.delete(STREAM, 2)
    # Another bucket is proven against the index: it disagrees with checkpoint 1, so fresh reads
    # the newest checkpoint again instead of failing, and proves KEY's bucket anew against it.
    other = "user/customer/bob/plan"
    assert bucket_of(SemEntry.id_for(other)) != bucket_of(STREAM)
    assert not fresh.sem.get(other)[1].exists
    with pytest.raises(IntegrityFailure) as caught:
        fresh.sem.get(KEY)
    short = truncation(STREAM, 2, number, 2, "ends at version 1")
    assert str(caught.value) == f"INTEGRITY_FAILURE: {short}"


def bucket_row(table: RawTable, stream: UUID) -> bytes:
    rows = table.execute(
        "SELECT entries FROM mace_head_buckets WHERE bucket = %s", (bucket_of(stream),)
    )
    return bytes(rows[0][0])


def set_bucket_row(table: RawTable, stream: UUID, entries: bytes) -> None:
    table.execute(
        "UPDATE mace_head_buckets SET entries = %s WHERE bucket = %s",
        (entries, bucket_of(stream)),
    )


def lowered_head(table: RawTable, stream: UUID) -> bytes:
    entries = orjson.loads(bucket_row(table, stream))
    return canonical_json(
        [[name, head - 1 if name == str(stream) else head] for name, head in entries]
    )


@pytest.mark.parametrize(
    "edit",
    ["rolled back bucket", "bucket removed", "bucket not JSON", "node deleted", "node altered"],
)
def test_an_edited_head_index_fails_closed(
    edit: str, ledger: Ledger, table: RawTable, fresh: Ledger
) -> None:
    put(ledger, "silver", "gold")
    ledger.sem.put("user/customer/bob/plan", "gold")  # another bucket: stored path nodes
    number = checkpointed(ledger)
    # The attacker shortens the stream and makes the index agree with the store.
    table.delete(STREAM, 2)
    nodes = table.execute("SELECT level, idx FROM mace_head_nodes ORDER BY level, idx")
    on_path = [n for n in nodes if tuple(n) in set(path_positions(bucket_of(STREAM)))]
    if edit == "rolled back bucket":
        set_bucket_row(table, STREAM, lowered_head(table, STREAM))
    elif edit == "bucket removed":
        table.execute("DELETE FROM mace_head_buckets WHERE bucket = %s", (bucket_of(STREAM),))
    elif edit == "bucket not JSON":
        set_bucket_row(table, STREAM, b"not a bucket")
    else:
        assert on_path
        level, index = on_path[0]
        if edit == "node deleted":
            table.execute(
                "DELETE FROM mace_head_nodes WHERE level = %s AND idx = %s", (level, index)
            )
        else:
            table.execute(
                "UPDATE mace_head_nodes SET hash = %s WHERE level = %s AND idx = %s",
                (b"\x00" * 32, level, index),
            )

    with pytest.raises(IntegrityFailure) as caught:
        fresh.sem.get(KEY)
    failure = caught.value
    assert failure.stream == str(CHECKPOINT_STREAM)
    if edit == "bucket not JSON":
        assert failure.reason == "a head index row is not a bucket"
    else:
        assert failure.reason == f"the head index disagrees with checkpoint {number}"


def test_checkpoints_deleted_under_their_head_index_fail_closed(
    ledger: Ledger, table: RawTable, fresh: Ledger
) -> None:
    put(ledger, "silver")
    checkpointed(ledger)
    put(ledger, "gold")
    checkpointed(ledger)
    table.delete(CHECKPOINT_STREAM, 2)  # the newest: checkpoint 1's heads would allow version 1
    table.delete(STREAM, 2)
    with pytest.raises(IntegrityFailure, match="the head index disagrees with checkpoint 1"):
        fresh.sem.get(KEY)

    table.delete(CHECKPOINT_STREAM, 1)  # none left, the index still counts the stream
    with pytest.raises(IntegrityFailure, match="the head index holds streams, but no checkpoint"):
        fresh.sem.get(KEY)


def test_the_http_api_answers_a_truncated_stream_with_the_integrity_failure_status(
    api: Api, ledger: Ledger, table: RawTable
) -> None:
    tenant = CALLERS["operator"].tenant
    auditor = Actor.of("ada", ["auditor"])
    ledger.policy.set_bundle(tenant, "version: 1\nrules: []\n", auditor)
    ledger.policy.clear_bundle(tenant, auditor)
    number = checkpointed(ledger)
    stream = PolicyBook.id_for(scope_of(tenant))
    head = table.rows(stream)[-1][0]
    table.delete(stream, head)  # the clear: the bundle would be in force again

    assert_error(
        api.get("/v1/policy"),
        500,
        "INTEGRITY_FAILURE",
        truncation(stream, head, number, head, f"ends at version {head - 1}"),
    )


# A process that proves many paths against one checkpoint proves the whole index once instead
# (`head_check.WholeIndex`): each head after that is a look-up, and every attack still fails.

KEYS = [f"user/customer/{name}/plan" for name in "abcdefghijkl"]
"""Streams in twelve buckets: more than a process proves a path at a time
(`head_check.WHOLE_INDEX_AFTER`) in an index this small."""


@contextmanager
def index_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Each read of the head index while the block runs: a path read names how many buckets it
    proves; the count that prices the whole proof, and the whole proof's read."""
    reads: list[str] = []
    paths, size, rows = (
        CheckpointTables.head_paths,
        CheckpointTables.head_index_size,
        CheckpointTables.head_buckets,
    )

    def counted_paths(tables: CheckpointTables, buckets: Any, positions: Any) -> Any:
        reads.append(f"paths of {len(buckets)}")
        return paths(tables, buckets, positions)

    def counted_size(tables: CheckpointTables) -> Any:
        reads.append("count")
        return size(tables)

    def counted_rows(tables: CheckpointTables) -> Any:
        reads.append("whole")
        return rows(tables)

    with monkeypatch.context() as patch:
        patch.setattr(CheckpointTables, "head_paths", counted_paths)
        patch.setattr(CheckpointTables, "head_index_size", counted_size)
        patch.setattr(CheckpointTables, "head_buckets", counted_rows)
        yield reads


def spread(ledger: Ledger) -> int:
    """Each of `KEYS` written once, in a bucket of its own, and checkpointed: the number."""
    assert len({bucket_of(SemEntry.id_for(key)) for key in [*KEYS, KEY]}) == len(KEYS) + 1
    for key in KEYS:
        ledger.sem.put(key, "silver")
    return checkpointed(ledger)


def test_a_process_proving_many_paths_proves_the_whole_index_once(
    ledger: Ledger, fresh: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    spread(ledger)
    free = list(free_streams())
    with index_reads(monkeypatch) as reads:
        for key in KEYS:
            assert fresh.sem.get(key)[1].value == "silver"
        # Written or free, every bucket is proven now: no read of the index at all.
        assert store_of(fresh).checkpointed(free) == set()
        whole = list(reads)
        assert all(fresh.sem.get(key)[1].value == "silver" for key in KEYS)
    # Paths until the next would have made `WHOLE_INDEX_AFTER` of them (its first read also
    # proves the streams every read of the SEM reads), then the count and the whole index.
    *paths, count, read = whole
    proven = [int(path.removeprefix("paths of ")) for path in paths]
    assert sum(proven) < WHOLE_INDEX_AFTER <= sum(proven) + 1
    assert (count, read) == ("count", "whole")
    assert reads == whole


def test_a_truncation_is_caught_by_the_whole_index_proof(
    ledger: Ledger, table: RawTable, fresh: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(ledger, "silver", "gold")
    ledger.sem.put("user/customer/bob/plan", "gold")
    number = spread(ledger)
    table.delete(STREAM, 2)
    table.delete(SemEntry.id_for("user/customer/bob/plan"), 1)
    with index_reads(monkeypatch) as reads:
        assert [fresh.sem.get(key)[1].value for key in KEYS] == ["silver"] * len(KEYS)
        assert reads[-1] == "whole"
        # Neither bucket was proven by its path: the whole index's rows say their heads.
        with pytest.raises(IntegrityFailure) as caught:
            fresh.sem.get(KEY)
        assert (
            str(caught.value)
            == f"INTEGRITY_FAILURE: {truncation(STREAM, 2, number, 2, 'ends at version 1')}"
        )
        bob = SemEntry.id_for("user/customer/bob/plan")
        with pytest.raises(IntegrityFailure) as caught:
            store_of(fresh).stream_exists(bob)
        assert (
            str(caught.value)
            == f"INTEGRITY_FAILURE: {truncation(bob, 1, number, 1, 'holds none of it')}"
        )
        assert reads[-1] == "whole"


@pytest.mark.parametrize(
    "edit",
    [
        "rolled back bucket",
        "bucket removed",
        "bucket added",
        "bucket rewritten",
        "bucket not JSON",
        "bucket out of the tree",
    ],
)
def test_an_edited_head_index_fails_the_whole_index_proof_closed(
    edit: str, ledger: Ledger, table: RawTable, fresh: Ledger
) -> None:
    """The index is edited where no path a reader proves runs: the whole proof sees it."""
    put(ledger, "silver", "gold")
    number = spread(ledger)
    table.delete(STREAM, 2)
    bucket = bucket_of(STREAM)
    if edit == "rolled back bucket":
        set_bucket_row(table, STREAM, lowered_head(table, STREAM))
    elif edit == "bucket removed":
        table.execute("DELETE FROM mace_head_buckets WHERE bucket = %s", (bucket,))
    elif edit == "bucket added":
        # An empty bucket given a stream: an absent row is an empty bucket, so the root moves.
        stream = next(s for s in free_streams() if not bucket_held(table, bucket_of(s)))
        table.execute(
            "INSERT INTO mace_head_buckets (bucket, entries) VALUES (%s, %s)",
            (bucket_of(stream), canonical_json([[str(stream), 1]])),
        )
    elif edit == "bucket rewritten":
        # The same heads, written otherwise than the checkpoint's writer does.
        set_bucket_row(
            table,
            STREAM,
            orjson.dumps(orjson.loads(bucket_row(table, STREAM)), option=orjson.OPT_INDENT_2),
        )
    elif edit == "bucket not JSON":
        set_bucket_row(table, STREAM, b"not a bucket")
    else:
        table.execute(
            "INSERT INTO mace_head_buckets (bucket, entries) VALUES (%s, %s)", (1 << 16, b"[]")
        )

    with pytest.raises(IntegrityFailure) as caught:
        for key in KEYS:
            fresh.sem.get(key)
    failure = caught.value
    assert failure.stream == str(CHECKPOINT_STREAM)
    assert failure.reason == f"the head index disagrees with checkpoint {number}"


def free_streams() -> Iterator[UUID]:
    return (SemEntry.id_for(f"user/customer/free-{n}/plan") for n in range(100))


def bucket_held(table: RawTable, bucket: int) -> bool:
    return bool(table.execute("SELECT 1 FROM mace_head_buckets WHERE bucket = %s", (bucket,)))


def test_a_newer_checkpoint_is_proven_anew(
    ledger: Ledger, table: RawTable, fresh: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole index proven against checkpoint 1 says nothing of checkpoint 2's heads: once
    the process reads checkpoint 2, it proves against it, a path at a time again."""
    spread(ledger)
    check = store_of(fresh).recorder.head_check  # type: ignore[attr-defined]
    now = [0.0]
    monkeypatch.setattr(check, "_clock", lambda: now[0])
    with index_reads(monkeypatch) as reads:
        for key in KEYS:
            fresh.sem.get(key)
        assert reads[-1] == "whole"
    put(ledger, "silver", "gold")  # KEY's stream, in a bucket of its own
    number = checkpointed(ledger)
    table.delete(STREAM, 2)
    now[0] += CACHE_SECONDS + 1
    with index_reads(monkeypatch) as reads, pytest.raises(IntegrityFailure) as caught:
        fresh.sem.get(KEY)
    assert reads and all(read.startswith("paths of ") for read in reads)
    assert (
        str(caught.value)
        == f"INTEGRITY_FAILURE: {truncation(STREAM, 2, number, 2, 'ends at version 1')}"
    )


def test_whole_index_proof_is_priced_by_its_rows() -> None:
    """Bought as a ski rental: after about as many paths as its hashes cost, more for a
    larger index, and never more than a full tree's."""
    small, large, full = (WholeIndex.cost_in_paths(rows) for rows in (12, 10_000, 1 << 16))
    assert small < WHOLE_INDEX_AFTER < large < full
    assert full == -(-(2 * (1 << 16) - 1) // PATH_HASHES)
