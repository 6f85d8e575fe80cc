"""`verify --all` reads the log once, in notification order, on SQLite and PostgreSQL.

Each stored event's row is fetched once: its MAC checked once, its Merkle leaf hashed once (in
Python, from the bytes whose MAC was checked), its stream's versions, seal and witness held as it
passes. Counted here (rows fetched, MACs checked, leaves hashed), never timed: a second pass over
the table or a look-up per seal coming back fails these tests. Jobs whose events are interleaved
in the log with other jobs' (as concurrent writers leave them) verify whole, and the failure
reported is still the first in stream order, wherever it lies in the log.
"""

from __future__ import annotations

import marshal
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
from support.ledger_fixtures import RawTable, store_of
from support.sample_job import ROUTER

from domain import checkpoint
from domain.checkpoint import CHECKPOINT_STREAM
from domain.errors import ErrorCode, IntegrityFailure
from domain.job import Job, JobSealWitness
from domain.snapshot import Snapshot
from infrastructure.application.errors import failure_of
from infrastructure.application.ledger import Ledger
from infrastructure.storage.records import integrity, signed_record
from infrastructure.storage.settings import SQLiteStore
from infrastructure.storage.verification import log_pass, row_checks, scan, stream_facts
from infrastructure.storage.verification.ledger import LedgerVerification
from infrastructure.storage.verification.scan import StoreReader


@dataclass
class Fetched:
    """Rows fetched by the verifier's own reads of the events table, statement by statement."""

    table: str
    statements: list[str] = field(default_factory=list)
    rows: int = 0

    def executed(self, query: object, connection: Any) -> None:
        text = query.as_string(connection) if isinstance(query, psycopg.sql.Composable) else query
        self.statements.append(str(text))

    def counts(self, query: str) -> bool:
        return self.table in query


def _counting_sqlite(fetched: Fetched) -> type[sqlite3.Connection]:
    class Cursor(sqlite3.Cursor):
        counted = False

        def execute(self, sql: str, parameters: Any = ()) -> Cursor:
            fetched.executed(sql, None)
            self.counted = fetched.counts(sql)
            return super().execute(sql, parameters)

        def _tally(self, rows: list[Any]) -> list[Any]:
            if self.counted:
                fetched.rows += len(rows)
            return rows

        def fetchmany(self, size: int | None = None) -> list[Any]:
            return self._tally(super().fetchmany(size or self.arraysize))

        def fetchall(self) -> list[Any]:
            return self._tally(super().fetchall())

        def fetchone(self) -> Any:
            row = super().fetchone()
            return row if row is None else self._tally([row])[0]

    class Connection(sqlite3.Connection):
        def cursor(self, factory: Any = Cursor) -> Any:
            return super().cursor(factory)

        def execute(self, sql: str, parameters: Any = ()) -> Any:
            return self.cursor().execute(sql, parameters)

    return Connection


def _counting_cursor(base: type[Any], fetched: Fetched) -> type[Any]:
    class Cursor(base):  # type: ignore[misc]  # psycopg's client or server cursor
        counted = False

        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            fetched.executed(query, self.connection)
            self.counted = fetched.counts(fetched.statements[-1])
            return super().execute(query, params, **kwargs)

        def _tally(self, rows: list[Any]) -> list[Any]:
            if self.counted:
                fetched.rows += len(rows)
            return rows

        def fetchmany(self, size: int = 0) -> list[Any]:
            return self._tally(super().fetchmany(size))

        def fetchall(self) -> list[Any]:
            return self._tally(super().fetchall())

        def fetchone(self) -> Any:
            row = super().fetchone()
            return row if row is None else self._tally([row])[0]

    return Cursor


@pytest.fixture
def fetched(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> Fetched:
    """The rows the verifier's reader fetches from the events table, counted."""
    store = store_of(ledger)
    tally = Fetched(store.recorder.events_table_name)  # type: ignore[attr-defined]
    opened = StoreReader._connect

    def counted(reader: StoreReader) -> Any:
        if isinstance(reader.store, SQLiteStore):
            lite = sqlite3.connect(
                f"file:{reader.store.path}?mode=ro", uri=True, factory=_counting_sqlite(tally)
            )
            reader._stack.callback(lite.close)
            return lite
        conn: Any = opened(reader)
        conn.cursor_factory = _counting_cursor(psycopg.Cursor, tally)
        conn.server_cursor_factory = _counting_cursor(psycopg.ServerCursor, tally)
        return conn

    monkeypatch.setattr(StoreReader, "_connect", counted)
    return tally


@dataclass
class Calls:
    macs: int = 0
    leaves: int = 0


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    """Every MAC check and leaf hash a verify makes, counted wherever it is made (in this
    process: none is sent to a child to check)."""
    made = Calls()
    monkeypatch.setattr(row_checks, "may_fork", lambda: False)

    def counting(name: str, work: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any) -> Any:
            setattr(made, name, getattr(made, name) + 1)
            return work(*args)

        return counted

    verify = counting("macs", signed_record.verify_record)
    for module in (integrity, log_pass, stream_facts):
        monkeypatch.setattr(module, "verify_record", verify)
    check = counting("macs", signed_record.RecordCheck.__call__)
    monkeypatch.setattr(signed_record.RecordCheck, "__call__", check)
    monkeypatch.setattr(scan, "stream_leaf_hash", counting("leaves", checkpoint.stream_leaf_hash))
    leaf = counting("leaves", checkpoint.leaf_hash_after)
    monkeypatch.setattr(row_checks, "leaf_hash_after", leaf)
    return made


def _interleaved_jobs(ledger: Ledger, names: list[str]) -> None:
    """Jobs recorded piece by piece, a piece of each in turn: in the log each job's events lie
    between the others', as concurrent writers leave them."""
    snapshot, _ = ledger.snapshots.put(Snapshot.declare("router", ROUTER))
    for n, name in enumerate(names):
        ledger.jobs.start(name, f"seed {n}", "2 + 2", {"router": snapshot.snapshot_id})
    for name in names:
        ledger.jobs.record_events(name, [("ROUTER_DECISION", {"agent": "math_agent"})])
    for name in reversed(names):
        ledger.jobs.record_events(name, [("FINAL_OUTPUT", {"text": "4"})])
    for name in names:
        ledger.jobs.seal(name)


@pytest.fixture
def checkpointed(ledger: Ledger) -> Iterator[Ledger]:
    """Interleaved jobs, a checkpoint over them, and more interleaved jobs after it (counted,
    not yet covered): the store as CLI writes leave it, with a tail no checkpoint covers."""
    _interleaved_jobs(ledger, [f"before-{n}" for n in range(4)])
    checkpoints = store_of(ledger).checkpoints
    assert checkpoints is not None
    checkpoints.write()
    _interleaved_jobs(ledger, [f"after-{n}" for n in range(3)])
    yield ledger


def _stored(raw_table: RawTable) -> tuple[int, int]:
    """Rows in the events table, and how many of them are checkpoints (no leaves)."""
    ((rows,),) = raw_table.execute("SELECT count(*) FROM {table}")
    ((marks,),) = raw_table.execute(
        "SELECT count(*) FROM {table} WHERE originator_id = %s",
        (raw_table.key(CHECKPOINT_STREAM),),
    )
    return int(rows), int(marks)


def _streams(raw_table: RawTable) -> int:
    ((streams,),) = raw_table.execute("SELECT count(DISTINCT originator_id) FROM {table}")
    return int(streams)


def _verify(ledger: Ledger, *, tree: bool = True) -> LedgerVerification:
    verified: LedgerVerification = store_of(ledger).verify_all(tree=tree)
    return verified


def test_verify_fetches_each_event_once(
    checkpointed: Ledger, raw_table: RawTable, fetched: Fetched
) -> None:
    rows, checkpoint_rows = _stored(raw_table)
    verified = _verify(checkpointed)
    assert verified.events == rows
    assert verified.tree is not None and verified.tree.checkpoints == checkpoint_rows == 1
    # Every row once, by the one pass; besides it, only the checkpoints' positions, read by
    # version to hold them to the order they were committed in.
    assert fetched.rows == rows + checkpoint_rows, fetched.statements


def test_verify_checks_each_mac_once_and_hashes_each_leaf_once_in_python(
    checkpointed: Ledger, raw_table: RawTable, calls: Calls
) -> None:
    rows, checkpoint_rows = _stored(raw_table)
    _verify(checkpointed)
    # No seal or witness looked up again: each is held to the other as the pass meets them.
    # The checkpoints' own events are read and checked again by the chain's walk, which
    # decodes them (a stream of one event a checkpoint, not the log).
    assert calls.macs == rows + checkpoint_rows
    # Every event but the checkpoints is a leaf, hashed from the bytes whose MAC was checked.
    assert calls.leaves == rows - checkpoint_rows


def test_verify_without_the_tree_hashes_no_leaf(
    checkpointed: Ledger, raw_table: RawTable, calls: Calls
) -> None:
    rows, _ = _stored(raw_table)
    assert _verify(checkpointed, tree=False).events == rows
    assert (calls.macs, calls.leaves) == (rows, 0)


def test_interleaved_jobs_verify_whole(checkpointed: Ledger, raw_table: RawTable) -> None:
    verified = _verify(checkpointed)
    assert (verified.jobs, verified.sealed_jobs) == (7, 7)
    assert verified.streams == _streams(raw_table)
    assert verified.tree is not None and verified.tree.not_yet_checkpointed > 0


def _first_and_last_in_stream_order(names: list[str]) -> tuple[str, str]:
    ordered = sorted(names, key=Job.id_for)
    return ordered[0], ordered[-1]


def test_the_first_failing_stream_in_stream_order_is_reported_wherever_it_is_in_the_log(
    checkpointed: Ledger, raw_table: RawTable
) -> None:
    first, last = _first_and_last_in_stream_order([f"after-{n}" for n in range(3)])
    # The stream later in stream order is the one tampered with first in the log too.
    raw_table.delete(Job.id_for(last), 3)
    state = bytearray(raw_table.state(Job.id_for(first), 2))
    state[-3] ^= 0x01
    raw_table.set_column(Job.id_for(first), 2, "state", bytes(state))
    with pytest.raises(IntegrityFailure) as failure:
        _verify(checkpointed)
    assert (failure.value.stream, failure.value.version, failure.value.reason) == (
        str(Job.id_for(first)),
        2,
        "MAC mismatch",
    )


def test_a_witness_missing_far_from_its_seal_is_found_in_stream_order(
    checkpointed: Ledger, raw_table: RawTable
) -> None:
    first, last = _first_and_last_in_stream_order([f"after-{n}" for n in range(3)])
    raw_table.delete(JobSealWitness.id_for(last), 1)
    raw_table.delete(Job.id_for(first), 2)
    with pytest.raises(IntegrityFailure) as failure:
        _verify(checkpointed)
    assert (failure.value.stream, failure.value.version) == (str(Job.id_for(first)), 2)
    raw_table.execute(
        "DELETE FROM {table} WHERE originator_id = %s", (raw_table.key(Job.id_for(first)),)
    )
    raw_table.execute(
        "DELETE FROM {table} WHERE originator_id = %s",
        (raw_table.key(JobSealWitness.id_for(first)),),
    )
    with pytest.raises(IntegrityFailure, match="seal has no witness") as failure:
        _verify(checkpointed)
    assert failure.value.stream == str(Job.id_for(last))


def test_rows_of_a_stream_out_of_version_order_in_the_log_are_judged_by_version(
    checkpointed: Ledger, raw_table: RawTable
) -> None:
    """Past the newest checkpoint, nothing signed the log's order: a stream is held to its
    versions (as a read of the job holds it), not to where its rows lie in the log."""
    job = Job.id_for("after-0")
    rows = raw_table.rows(job)
    for version, _, _ in rows[1:]:
        raw_table.delete(job, version)
    for version, topic, state in reversed(rows[1:]):  # re-inserted last version first
        raw_table.execute(
            "INSERT INTO {table} (originator_id, originator_version, topic, state)"
            " VALUES (%s, %s, %s, %s)",
            (raw_table.key(job), version, topic, state),
        )
    verified = _verify(checkpointed)
    assert (verified.jobs, verified.sealed_jobs, verified.streams) == (7, 7, _streams(raw_table))
    # The same rows with a version gone: the gap is named as a read of the stream names it.
    raw_table.delete(job, 2)
    with pytest.raises(IntegrityFailure, match="version 2 is missing \\(next stored is 3\\)"):
        _verify(checkpointed)


def test_intact_merkle_nodes_are_compared_as_read_not_looked_up_one_by_one(
    checkpointed: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stored nodes of an intact tree equal the nodes made as one list: the look-up that
    names a node that differs (`StoreReader.log_nodes`) is made only on a failure."""

    def looked_up(*_: object) -> None:
        raise AssertionError("the nodes of an intact tree were looked up one by one")

    monkeypatch.setattr(StoreReader, "log_nodes", looked_up)
    verified = _verify(checkpointed)
    assert verified.tree is not None
    assert verified.tree.log_nodes is None


@pytest.mark.parametrize(
    ("edits", "named"),
    [
        # Node (1, 0) is completed by leaf 1, before leaf 3 completes node (0, 3).
        (
            [
                "UPDATE mace_log_nodes SET hash = %s WHERE level = 0 AND idx = 3",
                "UPDATE mace_log_nodes SET hash = %s WHERE level = 1 AND idx = 0",
            ],
            "(1, 0)",
        ),
        (["DELETE FROM mace_log_nodes WHERE level = 2 AND idx = 0"], "(2, 0)"),
    ],
    ids=["altered", "deleted"],
)
def test_stored_merkle_nodes_are_each_held_to_the_log(
    checkpointed: Ledger, raw_table: RawTable, edits: list[str], named: str
) -> None:
    """Nodes are read a range a level at a time; the node named is still the first the tree
    completes that the table does not hold as the log makes it."""
    for edit in edits:
        raw_table.execute(edit, (bytes(32),) if "%s" in edit else ())
    with pytest.raises(IntegrityFailure) as failure:
        _verify(checkpointed)
    state = "missing" if "DELETE" in edits[0] else "altered"
    assert failure.value.reason.startswith(f"log node {named} below checkpoint 1 is {state}: ")


@pytest.fixture
def in_a_child(monkeypatch: pytest.MonkeyPatch) -> Calls:
    """Every page of the pass checked by a forked child, a few rows a page (so that a page is
    in the child while the next is read), none here: the pages checked in this process are
    counted (in ``leaves``)."""
    here = Calls()
    check = row_checks.PageCheck.__call__

    def counted(self: row_checks.PageCheck, rows: list[Any]) -> Any:
        here.leaves += 1
        return check(self, rows)

    monkeypatch.setattr(row_checks.PageCheck, "__call__", counted)
    # The child only hashes, from states made before the fork: no lock another thread of
    # the test process holds is taken there.
    monkeypatch.setattr(row_checks, "may_fork", lambda: True)
    monkeypatch.setattr(scan, "SCAN_PAGE", 5)
    return here


def _failure(ledger: Ledger) -> tuple[str, str, int, str]:
    with pytest.raises(IntegrityFailure) as raised:
        _verify(ledger)
    found = failure_of(raised.value)
    assert found is not None
    return found.code, raised.value.stream, raised.value.version, raised.value.reason


def test_rows_checked_in_a_child_verify_as_rows_checked_here(
    checkpointed: Ledger, raw_table: RawTable, in_a_child: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows, _ = _stored(raw_table)
    verified = _verify(checkpointed)
    assert in_a_child.leaves == 0  # every page checked by the child
    assert verified.events == rows
    monkeypatch.setattr(row_checks, "may_fork", lambda: False)
    assert _verify(checkpointed) == verified
    assert in_a_child.leaves > 1


@pytest.mark.parametrize("tampered", ["MAC", "body"])
def test_a_row_tampered_with_is_caught_in_the_child_as_here(
    checkpointed: Ledger,
    raw_table: RawTable,
    in_a_child: Calls,
    monkeypatch: pytest.MonkeyPatch,
    tampered: str,
) -> None:
    """A row whose MAC the child does not accept is judged here, by the code that judges every
    row: the same code and message as when its page is checked in this process."""
    # A job after the newest checkpoint: its own MAC, not the checkpoint, catches it first.
    first, _ = _first_and_last_in_stream_order([f"after-{n}" for n in range(3)])
    state = bytearray(raw_table.state(Job.id_for(first), 2))
    if tampered == "body":
        state[-3] ^= 0x01
    else:  # another hex digit in the MAC's first place
        at = state.index(b".", len(b"mace1.")) + 1
        state[at] = ord("1") if state[at] == ord("0") else ord("0")
    raw_table.set_column(Job.id_for(first), 2, "state", bytes(state))
    in_child = _failure(checkpointed)
    assert in_a_child.leaves == 0
    monkeypatch.setattr(row_checks, "may_fork", lambda: False)
    assert _failure(checkpointed) == in_child
    assert in_child == (ErrorCode.INTEGRITY_FAILURE, str(Job.id_for(first)), 2, "MAC mismatch")


def test_a_child_gone_leaves_its_pages_to_be_checked_here(
    checkpointed: Ledger, raw_table: RawTable, in_a_child: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing is checked less when the child goes away: what it did not answer is checked
    here."""

    def one_page(check: row_checks.PageCheck, pages: Any) -> None:
        pages.send_bytes(marshal.dumps(check(marshal.loads(pages.recv_bytes()))))
        # and gone

    monkeypatch.setattr(row_checks, "_serve", one_page)
    rows, _ = _stored(raw_table)
    assert _verify(checkpointed).events == rows
    assert in_a_child.leaves > 0
