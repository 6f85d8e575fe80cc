"""What a process did in the events table: rows read, rows written, and the commits that wrote
them. `mace bench --compare-raw` does the same I/O again with nothing of the ledger around it,
on the same store, and compares the two (`infrastructure.tooling.bench_raw`).

Counting is a few integer additions per statement, so it is always on. Threads of one process
(the HTTP service) may lose an addition now and then: the tally is a measure, not a ledger.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Final, TypeVar
from uuid import UUID
from weakref import WeakSet

from eventsourcing.persistence import Notification, StoredEvent
from psycopg import capabilities
from psycopg._connection_base import BaseConnection
from psycopg._cursor_base import BaseCursor
from psycopg._pipeline_base import BasePipeline
from psycopg._server_cursor_base import ServerCursorMixin
from psycopg.waiting import Ready


@dataclass(slots=True)
class IoTally:
    rows_read: int = 0
    rows_written: int = 0
    commits: int = 0

    def since(self, before: IoTally) -> IoTally:
        """What was done after ``before`` (an earlier `snapshot` of this tally)."""
        return IoTally(
            self.rows_read - before.rows_read,
            self.rows_written - before.rows_written,
            self.commits - before.commits,
        )

    def snapshot(self) -> IoTally:
        return replace(self)


class TalliedIo:
    """A recorder mixin (first in the bases) that tallies every read of stored events and
    every insert of them into ``io``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.io = IoTally()

    def select_events(self, originator_id: UUID | str, **kwargs: Any) -> Sequence[StoredEvent]:
        events: Sequence[StoredEvent] = super().select_events(  # type: ignore[misc]
            originator_id, **kwargs
        )
        self.io.rows_read += len(events)
        return events

    def select_streams(self, streams: Sequence[UUID]) -> dict[UUID, Sequence[StoredEvent]]:
        found: dict[UUID, Sequence[StoredEvent]] = super().select_streams(  # type: ignore[misc]
            streams
        )
        # A stream read again alone after a shortfall was counted by `select_events` too: only
        # on the failure path, so the tally does not tell them apart.
        self.io.rows_read += sum(map(len, found.values()))
        return found

    def select_notifications(self, *args: Any, **kwargs: Any) -> Sequence[Notification]:
        page: Sequence[Notification] = super().select_notifications(  # type: ignore[misc]
            *args, **kwargs
        )
        self.io.rows_read += len(page)
        return page

    def insert_events_with(self, stored_events: Sequence[StoredEvent], also: Any) -> Sequence[int]:
        ids: Sequence[int] = super().insert_events_with(  # type: ignore[misc]
            stored_events, also
        )
        self.io.rows_written += len(stored_events)
        self.io.commits += 1
        return ids


@dataclass(slots=True)
class WireTally:
    """What this process sent its stores while `counting_wire` was on: the statements the
    server (or SQLite) executed, and the round trips they took.

    A round trip is one wait for the server's answer to what was sent: without pipeline mode,
    one per statement (two for a statement prepared first, a Parse and then an Execute); in
    pipeline mode, one each time the client reads answers after sending, however many statements
    it carried: one per sync or flush, and one more for answers that arrived while psycopg was
    still sending. SQLite runs in this process: it has statements and no round trips.
    """

    statements: int = 0
    round_trips: int = 0

    def since(self, before: WireTally) -> WireTally:
        """What was sent after ``before`` (an earlier `snapshot` of this tally)."""
        return WireTally(self.statements - before.statements, self.round_trips - before.round_trips)

    def snapshot(self) -> WireTally:
        return replace(self)

    def sqlite_statement(self, statement: str) -> None:
        """SQLite's trace callback: called as each statement starts, once per row of an
        ``executemany``; a trigger's body is traced as a ``--`` comment inside its statement."""
        if not statement.startswith("--"):
            self.statements += 1


@contextmanager
def counting_wire() -> Iterator[WireTally]:
    """Count, while the block runs, every statement this process sends to any store and the
    round trips they take (`WireTally`): `mace bench`'s statements and round trips per unit.

    Only connections made inside the block are counted on SQLite (each gets SQLite's own trace
    callback as ``sqlite3.connect`` makes it), so the ledger is opened inside it, and closed
    inside it too: a SQLite connection still open after the block keeps adding to a tally no
    one reads (``sqlite3`` connections cannot be weakly referenced, to be found again).

    PostgreSQL offers no statement hook, and ``pg_stat_statements`` may not be installed, so
    psycopg is counted where it sends: its cursors' sends (`_execute_send`, `_send_prepare`,
    `_send_query_prepared`), its connections' own commands (``BEGIN``, ``COMMIT``,
    ``DEALLOCATE``, a server cursor's ``FETCH``: `_exec_command`), a protocol-level ``Close``, a
    server cursor's ``Describe``, and a pipeline's reads of results (`_communicate_gen`,
    `_fetch_gen`), a round trip each first read after a send. These are
    psycopg's private methods: ``tests/tooling/test_bench_counts.py`` holds the counts to
    libpq's own protocol trace, so a psycopg that sends elsewhere fails there instead of
    undercounting here. One count at a time; the methods are put back as the block ends.
    """
    tally = WireTally()
    connect = sqlite3.connect

    def connect_traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection: sqlite3.Connection = connect(*args, **kwargs)
        connection.set_trace_callback(tally.sqlite_statement)
        return connection

    patches = _psycopg_counters(tally)
    originals = [(owner, name, owner.__dict__[name]) for owner, name, _ in patches]
    if any(getattr(method, _COUNTING, False) for _, _, method in originals):
        raise RuntimeError("statements are counted already: one count at a time")
    for owner, name, counted in patches:
        setattr(owner, name, counted)
    sqlite3.connect = connect_traced  # type: ignore[assignment]  # typeshed's overloads
    try:
        yield tally
    finally:
        sqlite3.connect = connect
        for owner, name, method in originals:
            setattr(owner, name, method)


_COUNTING: Final = "_mace_counting"
"""Marks a psycopg method replaced by `counting_wire` (so that counts do not nest)."""


def _counted(function: Callable[..., Any]) -> Callable[..., Any]:
    setattr(function, _COUNTING, True)
    return function


def _psycopg_counters(tally: WireTally) -> list[tuple[type, str, Callable[..., Any]]]:
    """psycopg's send points, each wrapped to count into ``tally``: (class, method, wrapper)."""
    cursor_send = BaseCursor.__dict__["_execute_send"]
    prepare = BaseCursor.__dict__["_send_prepare"]
    send_prepared = BaseCursor.__dict__["_send_query_prepared"]
    command = BaseConnection.__dict__["_exec_command"]
    deallocate = BaseConnection.__dict__["_deallocate"]
    describe = ServerCursorMixin.__dict__["_describe_gen"]
    communicate = BasePipeline.__dict__["_communicate_gen"]
    fetch = BasePipeline.__dict__["_fetch_gen"]
    # The pipelines that sent since they last read: their next read ends a round trip.
    sending: WeakSet[BasePipeline] = WeakSet()

    def read(pipeline: BasePipeline) -> None:
        if pipeline in sending:
            sending.discard(pipeline)
            tally.round_trips += 1

    def sent(connection: BaseConnection[Any], statements: int) -> None:
        # Outside a pipeline, the sender waits for each answer before it sends again.
        tally.statements += statements
        if connection._pipeline is None:
            tally.round_trips += 1

    @_counted
    def execute_send(cursor: BaseCursor[Any, Any], *args: Any, **kwargs: Any) -> None:
        sent(cursor._conn, 1)
        cursor_send(cursor, *args, **kwargs)

    @_counted
    def send_prepare(cursor: BaseCursor[Any, Any], *args: Any, **kwargs: Any) -> None:
        sent(cursor._conn, 0)  # a Parse: nothing executed yet
        prepare(cursor, *args, **kwargs)

    @_counted
    def send_query_prepared(cursor: BaseCursor[Any, Any], *args: Any, **kwargs: Any) -> None:
        sent(cursor._conn, 1)
        send_prepared(cursor, *args, **kwargs)

    @_counted
    def exec_command(connection: BaseConnection[Any], *args: Any, **kwargs: Any) -> Any:
        sent(connection, 1)
        return (yield from command(connection, *args, **kwargs))

    @_counted
    def deallocate_one(connection: BaseConnection[Any], name: bytes | None) -> Any:
        # ``DEALLOCATE`` statements go through `_exec_command`; a protocol Close does not.
        if name is not None and capabilities.has_send_close_prepared():
            sent(connection, 0)
        return (yield from deallocate(connection, name))

    @_counted
    def describe_portal(cursor: ServerCursorMixin[Any, Any]) -> Any:
        sent(cursor._conn, 0)  # a Describe after the DECLARE
        return (yield from describe(cursor))

    @_counted
    def communicate_queued(pipeline: BasePipeline) -> Any:
        # psycopg sends a pipeline's queued commands one at a time as the socket takes them,
        # and reads whatever answers have arrived each time the socket is readable: a server
        # quicker than the client (a loaded machine) has answered a whole pipeline, Sync
        # included, before `_fetch_gen` would wait for it. Each time the wait reports, as
        # `pipeline_communicate` does: a read if readable, then a send if writable and queued.
        def ready(events: int) -> None:
            if events & Ready.R:
                read(pipeline)
            if events & Ready.W and pipeline.command_queue:
                sending.add(pipeline)

        return (yield from _watched(communicate(pipeline), ready))

    @_counted
    def fetch_results(pipeline: BasePipeline, *, flush: bool) -> Any:
        if pipeline.result_queue:  # results are awaited: the client waits on the server
            if flush:
                sending.add(pipeline)  # a Flush message, answered by what the server holds
            read(pipeline)
        return (yield from fetch(pipeline, flush=flush))

    return [
        (BaseCursor, "_execute_send", execute_send),
        (BaseCursor, "_send_prepare", send_prepare),
        (BaseCursor, "_send_query_prepared", send_query_prepared),
        (BaseConnection, "_exec_command", exec_command),
        (BaseConnection, "_deallocate", deallocate_one),
        (ServerCursorMixin, "_describe_gen", describe_portal),
        (BasePipeline, "_communicate_gen", communicate_queued),
        (BasePipeline, "_fetch_gen", fetch_results),
    ]


_Done = TypeVar("_Done")


def _watched(
    steps: Generator[Any, Any, _Done], ready: Callable[[int], None]
) -> Generator[Any, Any, _Done]:
    """``steps``, a psycopg generator, run unchanged; each readiness its wait function reports
    (`Ready` flags) is shown to ``ready`` before ``steps`` acts on it."""
    try:
        wait = next(steps)
        while True:
            events = yield wait
            ready(events)
            wait = steps.send(events)
    except StopIteration as done:
        value: _Done = done.value
        return value
